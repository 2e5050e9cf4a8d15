"""The random-number state a run consumes, captured and restored so that a resumed run draws the same numbers.

The trainer draws from torch's global generators only (augmentation, dropout, drop-path): the CPU generator, and
the current CUDA device's generator on GPU. Data order does not use them (it is a function of seed and epoch).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["capture_rng_state", "restore_rng_state"]


def capture_rng_state(device: torch.device) -> dict[str, Any]:
    """``{"cpu": ByteTensor, "cuda": ByteTensor | None}`` — plain tensors, storable with ``weights_only``."""
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return {"cpu": torch.get_rng_state(), "cuda": cuda}


def restore_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"], device)
