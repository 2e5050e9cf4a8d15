"""Normalisation layers and the factory the blocks use to build them."""

from __future__ import annotations

from functools import partial
from typing import Callable

from torch import nn

__all__ = ["NormFactory", "layer_norm"]

NormFactory = Callable[[int], nn.Module]


def layer_norm(eps: float = 1e-6) -> NormFactory:
    """A factory ``dim -> nn.LayerNorm(dim, eps=eps)``; CaiT, DeiT III and timm ViTs use ``eps = 1e-6``."""
    return partial(nn.LayerNorm, eps=eps)
