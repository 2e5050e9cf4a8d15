"""Activation checkpointing per transformer block (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost").

With checkpointing on, a block keeps only its input during the forward and recomputes its activations during the
backward: activation memory falls from about ``L · (per-block activations)`` to ``L · (one block input) + one block``,
for roughly one extra forward per step. The recomputation replays the random-number state
(``preserve_rng_state``), so dropout and stochastic depth draw the same masks and the gradients are those of the
plain model. Same interface as timm: ``model.set_grad_checkpointing(True)`` and ``model.grad_checkpointing``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .validation import check_bool

__all__ = ["GradCheckpointing", "check_grad_checkpointing"]


def check_grad_checkpointing(enable) -> bool:
    """Return ``enable`` if it is a bool, else raise a one-line ``ValueError``
    (:func:`~layerscale.models.validation.check_bool`)."""
    return check_bool("grad_checkpointing", enable)


class GradCheckpointing:
    """Mixin for models whose repeated blocks may be checkpointed; the model sets ``self.grad_checkpointing``."""

    grad_checkpointing: bool = False

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Recompute each block's activations in the backward instead of storing them (training only)."""
        self.grad_checkpointing = check_grad_checkpointing(enable)

    def _checkpointing_now(self) -> bool:
        return self.grad_checkpointing and self.training and torch.is_grad_enabled()

    def _run_block(self, block: nn.Module, *inputs: torch.Tensor) -> torch.Tensor:
        """``block(*inputs)``, checkpointed when checkpointing is on and a backward will follow."""
        if self._checkpointing_now():
            return checkpoint(block, *inputs, use_reentrant=False)
        return block(*inputs)

    def _run_blocks(self, blocks: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
        """The blocks of ``blocks`` in order, each through :meth:`_run_block`."""
        if not self._checkpointing_now():
            return blocks(x)
        for block in blocks:
            x = self._run_block(block, x)
        return x
