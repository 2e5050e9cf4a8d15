"""LayerNorm Scaling (LNS): ``x ← x + F(LN(x) / √l)`` for block ``l`` (Sun et al. 2025, "The Curse of Depth in
Large Language Models", arXiv 2502.05795)."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..base import BlockContext, Branch, ResidualMethod


class DepthScaledLayerNorm(nn.LayerNorm):
    """``LN(x) / √l``: a LayerNorm (affine included) whose output is divided by the square root of ``layer_index``.

    The factor is a constant, not a parameter, so the keys stay ``weight`` / ``bias`` and a Pre-LN checkpoint loads.
    """

    def __init__(self, normalized_shape: int, layer_index: int, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        if isinstance(layer_index, bool) or not isinstance(layer_index, int) or layer_index < 1:
            raise ValueError(f"layer_index must be a positive int, got {layer_index!r}")
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine, bias=bias, device=device,
                         dtype=dtype)
        self.layer_index = layer_index
        self.depth_scale = 1.0 / math.sqrt(layer_index)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.depth_scale

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, layer_index={self.layer_index}"


class LayerNormScaling(ResidualMethod):
    """Pre-LN whose input LayerNorms in block ``l`` (1-based ``ctx.index``) are scaled by ``1/√l``.

    Deep Pre-LN stacks let the stream's variance grow with depth so that late blocks approach the identity; the
    1/√l factor damps each block's contribution accordingly. Standard initialisation; the model's final norm is an
    ordinary LayerNorm (the paper scales the per-layer norms only). In CaiT the class-attention blocks continue the
    count (``l = depth + j + 1``). Needs the model's ``norm_layer`` to build ``nn.LayerNorm``; needs ``index`` and
    ``depth``; ``init_value`` ignored; ``ls_placement`` must stay ``"both"``.
    """

    name = "lns"
    needs_depth = True

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        base = ctx.norm_layer(ctx.dim)
        if type(base) is not nn.LayerNorm:
            raise ValueError(f"residual 'lns' scales a LayerNorm, but norm_layer builds {type(base).__name__}")
        return DepthScaledLayerNorm(ctx.dim, ctx.index, eps=base.eps, elementwise_affine=base.elementwise_affine,
                                    bias=base.bias is not None)
