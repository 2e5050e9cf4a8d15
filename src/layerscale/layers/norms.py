"""Normalisation layers and the factory the blocks use to build them."""

from __future__ import annotations

from functools import partial
from typing import Callable

from torch import nn

__all__ = ["NORM_KINDS", "NormFactory", "layer_norm", "norm_factory", "rms_norm"]

NormFactory = Callable[[int], nn.Module]

#: The values of ``norm=`` on models and blocks.
NORM_KINDS = ("layernorm", "rmsnorm")


def layer_norm(eps: float = 1e-6) -> NormFactory:
    """A factory ``dim -> nn.LayerNorm(dim, eps=eps)``; CaiT, DeiT III and timm ViTs use ``eps = 1e-6``."""
    return partial(nn.LayerNorm, eps=eps)


def rms_norm(eps: float = 1e-6) -> NormFactory:
    """A factory ``dim -> nn.RMSNorm(dim, eps=eps)``: ``y = x / √(mean(x²) + eps) ⊙ g``, ``g`` initialised to 1.

    Root-mean-square layer normalisation (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization", NeurIPS;
    arXiv 1910.07467, Eq. 4): no centring and no bias. Key ``weight`` (``g``).
    """
    return partial(nn.RMSNorm, eps=eps)


def norm_factory(kind: str = "layernorm", eps: float = 1e-6) -> NormFactory:
    """The factory for ``norm=kind``: ``"layernorm"`` (:func:`layer_norm`) or ``"rmsnorm"`` (:func:`rms_norm`)."""
    if kind == "layernorm":
        return layer_norm(eps)
    if kind == "rmsnorm":
        return rms_norm(eps)
    raise ValueError(f"norm must be one of {list(NORM_KINDS)}, got {kind!r}")
