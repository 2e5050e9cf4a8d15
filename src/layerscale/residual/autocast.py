"""Turning autocast off around computations that must keep their inputs' dtype (the hyper-connection mixing)."""

from __future__ import annotations

import contextlib

import torch

__all__ = ["without_autocast"]


def without_autocast(device_type: str):
    """A context that turns autocast off on ``device_type`` where it is on (else it does nothing; also on device
    types without autocast, such as ``meta``)."""
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()
