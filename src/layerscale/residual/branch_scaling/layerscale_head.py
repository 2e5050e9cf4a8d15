"""Per-head LayerScale: one learnable scale per attention head, per-channel γ on the MLP branch.

Attention branch: ``x + proj(concat_h(γ_h · o_h))`` with ``γ ∈ R^H`` initialised to ε and **no bias** on ``proj``
(a bias added after the merge would not be ε-small at initialisation). MLP branch: ``x + γ ⊙ MLP(LN(x))``.
The nearest published form is NormFormer's head scale (Shleifer et al. 2021), which initialises it at 1.
"""

from __future__ import annotations

from ...layers.layer_scale import LayerScale
from ..base import BlockContext, Branch, ResidualMethod


class LayerScaleHead(ResidualMethod):
    """Per-head scale inside attention (key ``attn.head_scale.gamma``), per-channel ``ls2.gamma`` on the MLP."""

    name = "layerscale_head"
    uses_placement = True

    def head_scale_init(self, ctx: BlockContext) -> float | None:
        return ctx.epsilon if ctx.scaled("attn") else None

    def scale(self, ctx: BlockContext, branch: Branch):
        if branch == "mlp" and ctx.scaled("mlp"):
            return LayerScale(ctx.dim, ctx.epsilon)
        return None
