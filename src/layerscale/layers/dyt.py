"""Dynamic Tanh (DyT), a drop-in replacement for LayerNorm in transformers.

Zhu, Chen, He, LeCun and Liu 2025, "Transformers without Normalization" (arXiv 2503.10622)::

    DyT(x) = w ⊙ tanh(a · x) + b,      a ∈ R a learnable scalar, w, b ∈ R^d

initialised ``a = 0.5`` (the paper's default α₀), ``w = 1``, ``b = 0``. Unlike LayerNorm it computes no statistics:
the tanh squashes the extreme activations that LayerNorm would have rescaled. State-dict keys ``alpha``,
``weight``, ``bias`` as in the official code (facebookresearch/DynamicTanh).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["DyT"]


class DyT(nn.Module):
    """``y = weight ⊙ tanh(alpha · x) + bias`` over the last dimension ``dim``; ``alpha`` is one scalar."""

    def __init__(self, dim: int, alpha_init: float = 0.5, device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if isinstance(alpha_init, bool) or not isinstance(alpha_init, (int, float)) or not (
                math.isfinite(alpha_init) and alpha_init > 0):
            raise ValueError(f"alpha_init must be a finite number > 0, got {alpha_init!r}")
        self.dim, self.alpha_init = dim, float(alpha_init)
        self.alpha = nn.Parameter(torch.empty(1, device=device, dtype=dtype))
        self.weight = nn.Parameter(torch.empty(dim, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(dim, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``alpha = alpha_init``, ``weight = 1``, ``bias = 0`` (works after ``to_empty()`` from the meta device)."""
        with torch.no_grad():
            self.alpha.fill_(self.alpha_init)
            self.weight.fill_(1.0)
            self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"DyT expected last dimension {self.dim}, got input of shape {tuple(x.shape)}")
        return torch.addcmul(self.bias, torch.tanh(self.alpha * x), self.weight)

    def extra_repr(self) -> str:
        return f"{self.dim}, alpha_init={self.alpha_init:g}"
