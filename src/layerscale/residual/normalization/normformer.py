"""NormFormer: Pre-LN plus three normalisation operations (Shleifer, Weston and Ott 2021, "NormFormer: Improved
Transformer Pretraining with Extra Normalization", arXiv 2110.09456; fairseq ``--scale-attn --scale-fc
--scale-heads``)."""

from __future__ import annotations

from torch import nn

from ..base import BlockContext, Branch, ResidualMethod


class NormFormer(ResidualMethod):
    """Pre-LN with a LayerNorm on the attention output, a per-head scale, and a LayerNorm after the MLP activation.

    With ``LN`` the model's norm (``norm=`` chooses LayerNorm or RMSNorm) the block is (paper §2, Figure 1)::

        x ← x + LN_a(HeadScaleMHA(LN₁(x)))       HeadScaleMHA = Concat(γ_1 h_1, …, γ_H h_H) W^O,  γ_h = 1 at init
        x ← x + W₂ LN_f(GELU(W₁ LN₂(x)))         (biases of W₁, W₂ as in the plain MLP)

    Keys besides Pre-LN's: ``out_norm1.*`` (``LN_a``), ``attn.head_scale.gamma`` (γ, shape ``(H,)``),
    ``mlp.mid_norm.*`` (``LN_f`` over the MLP's hidden width). The output projection ``W^O`` keeps its bias (fairseq's
    ``out_proj``); the head scale multiplies each head's output before the projection. The residual scaling
    ``λ_resid`` the paper also tries (``--scale-resids``) is not part of the three operations and is not applied.
    With ``drop_rate > 0`` the attention-output LayerNorm follows the projection dropout (it is this block's output
    norm; fairseq normalises before that dropout); without dropout the two orders are the same function.
    The model's final norm is kept. ``init_value`` ignored; ``ls_placement`` must stay ``"both"``.
    """

    name = "normformer"
    head_scale_keeps_proj_bias = True

    def output_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ctx.norm_layer(ctx.dim) if branch == "attn" else None

    def head_scale_init(self, ctx: BlockContext) -> float | None:
        return 1.0

    def mid_norm(self, ctx: BlockContext, hidden_features: int) -> nn.Module | None:
        return ctx.norm_layer(hidden_features)
