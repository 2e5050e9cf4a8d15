"""Post-LN residual: ``x ← LN(x + F(x))`` — the original Transformer (Vaswani et al. 2017, "Attention Is All You
Need", NeurIPS)."""

from __future__ import annotations

from torch import nn

from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod


class PostNorm(ResidualMethod):
    """Each branch sees the raw stream and the sum is normalised: ``x_{l+1} = LN(x_l + F(x_l))``.

    No final norm before the head: every block already ends with a LayerNorm (as in the original Transformer and
    fairseq's Post-LN encoder, whose final ``layer_norm`` exists only when ``normalize_before``). Keys
    ``post_norm1.*`` and ``post_norm2.*``; ``norm1`` / ``norm2`` are absent.
    """

    name = "postnorm"

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return None

    def post_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ctx.norm_layer(ctx.dim)

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return None
