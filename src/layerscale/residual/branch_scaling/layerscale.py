"""LayerScale residual: ``x + γ ⊙ F(LN(x))``, ``γ ∈ R^d`` per branch (Touvron et al. 2021, CaiT, arXiv 2103.17239)."""

from __future__ import annotations

from ...layers.layer_scale import LayerScale
from ..base import BlockContext, Branch, ResidualMethod


class LayerScaleResidual(ResidualMethod):
    """Per-channel LayerScale on the branches named by ``ctx.placement``.

    γ is initialised to ε: the explicit ``init_value`` or the depth rule (0.1 for depth ≤ 18, 1e-5 for ≤ 24,
    1e-6 deeper). State-dict keys ``ls1.gamma`` (attention) and ``ls2.gamma`` (MLP), as in timm.
    """

    name = "layerscale"
    uses_placement = True

    def scale(self, ctx: BlockContext, branch: Branch):
        return LayerScale(ctx.dim, ctx.epsilon) if ctx.scaled(branch) else None
