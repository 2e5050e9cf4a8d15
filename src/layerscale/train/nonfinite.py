"""Locating where a forward pass first produced a NaN or an infinity.

When a step's loss or gradient norm is not finite, the trainer re-runs that batch's forward (same weights, same
random draws) with forward hooks on every transformer block and every top-level module. Hooks fire in completion
order, so the first hooked block whose output is non-finite is the block where the blow-up entered the residual
stream; whether that block's input was still finite tells a block that produced it from one that received it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .distributed import residual_blocks

__all__ = ["NonFiniteError", "NonFiniteReport", "locate_nonfinite"]


class NonFiniteError(FloatingPointError):
    """The run stopped on a non-finite loss or gradient (``run.on_nonfinite: stop``); the message names the step,
    the first non-finite block and the last good checkpoint, and ``step`` is that step (``None`` when unknown)."""

    def __init__(self, message: str, step: int | None = None) -> None:
        super().__init__(message)
        self.step = step


@dataclass(frozen=True)
class NonFiniteReport:
    """``block_index``: position of the first block with a non-finite output (``None`` if every block's output
    was finite); ``text``: the sentence for the user."""

    block_index: int | None
    text: str


def _finite(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        return not obj.is_floating_point() or bool(torch.isfinite(obj).all())
    if isinstance(obj, (tuple, list)):
        return all(_finite(o) for o in obj)
    if isinstance(obj, dict):
        return all(_finite(o) for o in obj.values())
    return True


def locate_nonfinite(model: nn.Module, forward: Callable[[], Any]) -> NonFiniteReport:
    """Run ``forward()`` (which must call ``model``) under ``no_grad`` with hooks, and report the first block whose
    output is not finite; failing that, the first top-level module; failing that, say that the forward is finite."""
    blocks = residual_blocks(model)
    block_index = {id(m): i for i, (_, m) in enumerate(blocks)}
    watched = blocks + [(name, m) for name, m in model.named_children() if id(m) not in block_index]
    events: list[tuple[str, nn.Module, bool, bool]] = []
    handles = [
        module.register_forward_hook(
            lambda mod, args, out, name=name: events.append((name, mod, _finite(args), _finite(out))))
        for name, module in watched
    ]
    try:
        with torch.no_grad():
            forward()
    finally:
        for handle in handles:
            handle.remove()
    for name, module, input_ok, output_ok in events:
        if not output_ok and id(module) in block_index:
            cause = "its input was finite" if input_ok else "its input was already non-finite"
            return NonFiniteReport(block_index[id(module)], f"first non-finite block output: {name} ({cause})")
    for name, _, _, output_ok in events:
        if not output_ok:
            return NonFiniteReport(None, f"every block output is finite; first non-finite output: {name}")
    return NonFiniteReport(None, "every block output is finite when the forward is re-run; the loss or the "
                                 "backward pass produced the non-finite value")
