"""DeepNorm: ``x ← LN(α x + F(x))`` with a β-scaled initialisation (Wang, Ma, Dong, Huang, Zhang and Wei 2022,
"DeepNet: Scaling Transformers to 1,000 Layers", arXiv 2203.00555; microsoft/torchscale)."""

from __future__ import annotations

from torch import nn

from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod
from ..initialization.xavier_linear import init_branch_linears


def deepnorm_alpha(depth: int) -> float:
    """The skip-path constant α = (2L)^(1/4) for an encoder-only or decoder-only stack of ``L`` blocks."""
    return (2 * depth) ** 0.25


def deepnorm_beta(depth: int) -> float:
    """The initialisation gain β = (8L)^(-1/4) for an encoder-only or decoder-only stack of ``L`` blocks."""
    return (8 * depth) ** -0.25


class DeepNorm(ResidualMethod):
    """Post-LN with the stream up-weighted, ``x_{l+1} = LN(α x_l + F(x_l))``, and β-scaled Xavier weights.

    With ``L`` = ``ctx.depth`` blocks: α = (2L)^(1/4) (the block's ``skip_weight``); the MLP ``fc1``/``fc2``, the value
    projection (the v third of a packed ``qkv``) and the output projection ``proj`` are ``xavier_normal_`` with
    gain β = (8L)^(-1/4); query and key ``xavier_normal_`` with gain 1 — the paper's pseudo-code (Figure 2). Biases
    zero. (torchscale instead divides its default Xavier-uniform weights by β⁻¹ after construction, starting q, k
    and v from fairseq's gain 1/√2; the paper's pseudo-code is followed here.) Encoder-only and
    decoder-only stacks use the same formulas with their own ``L`` (torchscale ``encoder.py`` / ``decoder.py``), so
    ``ctx.kind`` does not change them; only an encoder-decoder, which no model here builds, would differ.

    The linears are swapped for :class:`~layerscale.residual.initialization.xavier_linear.XavierLinear`, which owns its
    initialisation (meta-device and ``model.reset_parameters()`` give the same weights; keys unchanged). No final
    norm before the head: the Post-LN form ends every block with a LayerNorm (torchscale builds the encoder's final
    ``layer_norm`` only for Pre-LN). ``init_value`` is ignored; ``ls_placement`` must stay ``"both"``; ``depth`` is
    required.
    """

    name = "deepnorm"
    needs_depth = True

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return None

    def post_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ctx.norm_layer(ctx.dim)

    def skip_weight(self, ctx: BlockContext) -> float:
        return deepnorm_alpha(ctx.depth)

    def configure(self, block: nn.Module, ctx: BlockContext) -> None:
        beta = deepnorm_beta(ctx.depth)
        init_branch_linears(block, qk_gain=1.0, value_gain=beta, proj_gain=beta, mlp_gain=beta, distribution="normal")

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return None
