"""Scalar residual scale: ``x + α F(LN(x))`` with one learnable α per branch (CaiT's ablation, Touvron et al. 2021)."""

from __future__ import annotations

from ...layers.layer_scale import ScalarScale
from ..base import BlockContext, Branch, ResidualMethod


class ScalarResidual(ResidualMethod):
    """LayerNorm kept, a single scalar α = ε per branch instead of a diagonal (keys ``ls1.gamma``, ``ls2.gamma``)."""

    name = "scalar"
    uses_placement = True

    def scale(self, ctx: BlockContext, branch: Branch):
        return ScalarScale(ctx.epsilon) if ctx.scaled(branch) else None
