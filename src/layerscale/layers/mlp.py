"""The transformer MLP branch: ``fc2(drop(act(fc1(x))))``."""

from __future__ import annotations

import torch
from torch import nn

from .layer_scale import _check_size

__all__ = ["Mlp"]


class Mlp(nn.Module):
    """Two-layer feed-forward network ``fc2(drop(GELU(fc1(x))))`` with hidden width ``hidden_features``.

    Keys ``fc1.*`` and ``fc2.*`` match timm's ``Mlp``; ``fc2`` is the linear that produces the branch output, the
    one into which a LayerScale γ can be folded. ``mid_norm`` (a module over the hidden width, or ``None``) normalises
    the hidden activations after the activation and its dropout, ``fc2(mid_norm(drop(GELU(fc1(x)))))`` — NormFormer's
    FFN LayerNorm (key ``mid_norm.*``; absent when ``None``). ``in_features``, ``hidden_features`` and
    ``out_features`` (``None``: ``in_features``) are ints >= 1, else a one-line ``ValueError`` naming the argument.
    """

    def __init__(self, in_features: int, hidden_features: int, out_features: int | None = None,
                 act_layer: type[nn.Module] = nn.GELU, drop: float = 0.0, bias: bool = True,
                 mid_norm: nn.Module | None = None) -> None:
        super().__init__()
        _check_size("in_features", in_features)
        _check_size("hidden_features", hidden_features)
        out_features = in_features if out_features is None else _check_size("out_features", out_features)
        self.fc1 = nn.Linear(in_features, hidden_features, bias=bias)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.mid_norm = mid_norm
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop1(self.act(self.fc1(x)))
        if self.mid_norm is not None:
            h = self.mid_norm(h)
        return self.drop2(self.fc2(h))
