"""SkipInit residual: ``x ← x + α F(x)`` with no normalisation (De & Smith 2020, "Batch Normalization Biases Residual
Blocks Towards the Identity Function in Deep Networks", NeurIPS; arXiv 2002.10444)."""

from __future__ import annotations

import math

from torch import nn

from ...layers.layer_scale import ScalarScale, check_init_value
from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod
from ..initialization.torch_default_init import init_like_torch_defaults


class SkipInit(ResidualMethod):
    """A learnable scalar α at the end of every residual branch, normalisation removed: ``x + α F(x)``.

    ``alpha`` is α's initial value: 0 by default (the registry's ``"skipinit"``: every block exactly the identity at
    initialisation), or a small value below ``1/√L`` (L the number of blocks), the range De & Smith give for a
    non-zero start, so that the stream's variance stays O(1) across depth — ``SkipInit(alpha=0.05)`` can be passed as
    ``residual=`` (a positive α needs the block's ``depth``; α ≥ 1/√L raises). One α per branch, keys ``ls1.gamma``
    and ``ls2.gamma``. ``init_value`` (the LayerScale ε) is ignored; ``ls_placement`` must stay ``"both"``; no final
    norm (the method has no normalisation anywhere).

    **Initialisation.** De & Smith define SkipInit for residual networks with He-initialised convolutions and give
    no transformer recipe; the nearest transformer reference for a zero-initialised scalar gate without
    normalisation is ReZero's code, whose PyTorch-default linears this method takes too
    (:mod:`layerscale.residual.initialization.torch_default_init`). That choice is ours, stated in ``docs/methods.md``.
    """

    name = "skipinit"

    def __init__(self, alpha: float = 0.0) -> None:
        self.alpha = check_init_value(alpha, "alpha")

    def validate(self, ctx: BlockContext) -> None:
        super().validate(ctx)
        if self.alpha > 0:
            if not ctx.depth_known:
                raise ValueError(f"skipinit with alpha={self.alpha:g} > 0 needs depth= to check alpha < 1/sqrt(depth)")
            bound = 1 / math.sqrt(ctx.depth)
            if self.alpha >= bound:
                raise ValueError(f"skipinit alpha must be below 1/sqrt(depth) = {bound:.4g} for depth {ctx.depth}, "
                                 f"got {self.alpha:g}")

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return None

    def scale(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ScalarScale(self.alpha)

    def configure(self, block: nn.Module, ctx: BlockContext) -> None:
        init_like_torch_defaults(block)

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return None

    def __repr__(self) -> str:
        return f"SkipInit(alpha={self.alpha:g})"
