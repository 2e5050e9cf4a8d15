"""The device an analysis runs on, checked before any computation."""

from __future__ import annotations

import torch

__all__ = ["analysis_device"]


def analysis_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a :class:`torch.device` (``None``: the CPU).

    Raises a one-line ``ValueError`` for a string torch does not read as a device, and for a CUDA (or MPS) device
    this machine does not have, before anything is computed.
    """
    if device is None:
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device {device!r} is not a torch device; expected e.g. 'cpu', 'cuda' or 'cuda:0'") from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {str(device)!r}: no CUDA GPU is available on this machine; use --device cpu")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    if resolved.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"device {str(device)!r}: MPS is not available on this machine; use --device cpu")
    return resolved
