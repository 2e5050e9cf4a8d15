"""Mix-LN: Post-LN in the first ⌊α·L⌋ blocks, Pre-LN in the rest, α = 0.25 (Li, Yin and Liu 2024, "Mix-LN:
Unleashing the Power of Deeper Layers by Combining Pre-LN and Post-LN", arXiv 2412.13795)."""

from __future__ import annotations

import math

from torch import nn

from ..base import BlockContext, Branch, ResidualMethod

#: The fraction of blocks, counted from the input, that use Post-LN.
MIXLN_POST_FRACTION = 0.25


def mixln_post_blocks(depth: int, fraction: float = MIXLN_POST_FRACTION) -> int:
    """How many leading blocks of a ``depth``-block stack are Post-LN: ``⌊fraction · depth⌋``."""
    # round() first so that e.g. 0.29 * 100 = 28.999999999999996 counts as 29.
    return math.floor(round(fraction * depth, 9))


class MixLN(ResidualMethod):
    """Block ``l`` (1-based) is Post-LN, ``LN(x + F(x))``, when ``l ≤ ⌊fraction · L⌋``, else Pre-LN, ``x + F(LN(x))``.

    Post-LN in the shallow blocks keeps their gradients large; Pre-LN in the deep blocks keeps training stable.
    The model's final norm is kept: the last blocks are Pre-LN, whose stream is unnormalised. In CaiT the count runs
    over the self-attention and class-attention blocks together (the class-attention blocks are last, so Pre-LN).
    Keys: ``post_norm{i}`` in Post-LN blocks, ``norm{i}`` in Pre-LN blocks. Needs ``index`` and ``depth``;
    ``init_value`` ignored; ``ls_placement`` must stay ``"both"``.
    """

    name = "mixln"
    needs_depth = True

    def __init__(self, post_fraction: float = MIXLN_POST_FRACTION) -> None:
        if isinstance(post_fraction, bool) or not isinstance(post_fraction, (int, float)) or not (
                0.0 <= post_fraction <= 1.0):
            raise ValueError(f"post_fraction must be a number in [0, 1], got {post_fraction!r}")
        self.post_fraction = float(post_fraction)

    def is_post_ln(self, ctx: BlockContext) -> bool:
        """Whether the block described by ``ctx`` is one of the leading Post-LN blocks."""
        return ctx.index <= mixln_post_blocks(ctx.depth, self.post_fraction)

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return None if self.is_post_ln(ctx) else ctx.norm_layer(ctx.dim)

    def post_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ctx.norm_layer(ctx.dim) if self.is_post_ln(ctx) else None

    def __repr__(self) -> str:
        return f"MixLN(post_fraction={self.post_fraction:g})"
