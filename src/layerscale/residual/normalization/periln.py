"""Peri-LN residual: ``x ← x + LN_out(F(LN_in(x)))`` (Kim et al. 2025, "Peri-LN: Revisiting Normalization Layer in
the Transformer Architecture", ICML; arXiv 2502.02732) — the shape of CogView's Sandwich-LN (Ding et al. 2021)."""

from __future__ import annotations

from torch import nn

from ..base import BlockContext, Branch, ResidualMethod


class PeriLN(ResidualMethod):
    """Pre-LN plus a LayerNorm on every branch output, before it joins the stream.

    Each branch then adds a unit-variance update (scaled by ``LN_out``'s learnable weight, initialised to 1), so
    the stream's variance grows linearly rather than with the branch outputs' own growth. Keys ``out_norm1.*`` and
    ``out_norm2.*`` besides Pre-LN's. The model's final norm is kept. ``init_value`` ignored; ``ls_placement`` must
    stay ``"both"``.
    """

    name = "periln"

    def output_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ctx.norm_layer(ctx.dim)
