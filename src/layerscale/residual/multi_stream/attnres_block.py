"""Block Attention Residuals (Kimi Team 2026, "Attention Residuals", arXiv 2603.15031, "Block AttnRes").

The ``L`` transformer blocks are partitioned into ``N`` contiguous groups ("blocks" in the paper; here *groups*, to
keep "block" for a transformer block). Inside a group the sub-layer outputs are summed as in an ordinary residual;
every sub-layer attends over the finished group sums plus the running partial sum of its own group::

    b_0 = h_1 (the embedding),   b_n = Σ_{j ∈ group n} f_j(h_j),   b_n^i = the sum of its first i sub-layers
    first layer of group n:  V = [b_0, b_1, ..., b_{n-1}]
    later layers:            V = [b_0, b_1, ..., b_{n-1}, b_n^{i-1}]
    h_l = Σ_{v ∈ V} softmax_v( w_lᵀ RMSNorm(v) ) · v         (as in Full AttnRes, :mod:`.attnres`)

This is the official PyTorch-style pseudocode (github.com/MoonshotAI/Attention-Residuals README, reproduced at
https://openlm.ai/attention-residuals; read 2026-12-06): the attention sub-layer of a transformer block whose
``layer_number`` starts a group attends over ``blocks + [partial_block]`` (the partial sum is then the previous
group's complete sum), then appends the partial sum to ``blocks`` and restarts it from the attention output; the
MLP sub-layer attends over ``blocks + [partial_block]`` and adds its output to the partial sum. Groups hold whole
transformer blocks (the pseudocode's boundary test counts ``block_size // 2`` transformer blocks). With the
embedding as the first "partial sum", the first group boundary makes ``b_0`` the embedding, as the report defines.

``num_blocks`` ``N`` (default 8, the report's "~8 blocks") is set per instance:
``residual=BlockAttentionResiduals(num_blocks=4)``. Partition (a choice: the report writes ``S = L/N`` layers per
group and does not say how a remainder is split): group ``n`` (0-based) starts at transformer block
``⌊n·L/N⌋``, so group sizes differ by at most one, and equal ``L/N`` when ``N`` divides ``L``; a stack of fewer than
``N`` blocks has one group per block. CaiT numbers its class-attention blocks after its self-attention blocks
(``depth`` counts both), so the groups span both stages; the class-attention stage starts its own stream from the
class token, whose first sub-layer output always starts a new source (the class token stays ``b_0``).

Output: as in Full AttnRes, "the final output layer aggregates all N block representations" (the report, §3.2):
the model's ``stream_reduce`` attends over the final stream ``[b_0, b_1, ..., b_N]`` with a pseudo-query of its own.

Memory: the stream carries at most ``N + 1`` tensors of the token shape (``b_0``, the finished groups and the
partial sum), against ``2L + 1`` for Full AttnRes — the report's ``O(Nd)`` against ``O(Ld)``.
"""

from __future__ import annotations

from .attnres import AttentionResiduals
from ..base import BlockContext, Branch

__all__ = ["BlockAttentionResiduals", "group_starts"]

#: The report's recommended number of groups ("with ~8 blocks, it recovers most of Full AttnRes's gains").
DEFAULT_NUM_BLOCKS = 8


def check_num_blocks(n) -> int:
    """Return ``n`` if it is an int ``>= 1``, else raise a one-line ``ValueError``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"num_blocks must be an int >= 1, got {n!r}")
    return n


def group_starts(depth: int, num_blocks: int) -> list[int]:
    """The 0-based transformer blocks that start a group: ``⌊n·L/N'⌋`` for ``n < N' = min(N, L)``."""
    groups = min(check_num_blocks(num_blocks), depth)
    return sorted({n * depth // groups for n in range(groups)})


class BlockAttentionResiduals(AttentionResiduals):
    """Block AttnRes with ``num_blocks`` groups (default 8): Full AttnRes over group sums and the partial sum.

    Same keys as :class:`~.attnres.AttentionResiduals` (``stream_mix{i}.pseudo_query``,
    ``stream_mix{i}.key_norm_weight``, ``stream_reduce.*``); only which outputs start a new source differs. Needs the block's place in
    its stack (``index`` of ``depth``).
    """

    name = "attnres_block"
    needs_depth = True

    def __init__(self, num_blocks: int = DEFAULT_NUM_BLOCKS) -> None:
        self.num_blocks = check_num_blocks(num_blocks)

    def starts_source(self, ctx: BlockContext, branch: Branch) -> bool:
        """The attention sub-layer of a transformer block that starts a group begins a new partial sum."""
        return branch == "attn" and (ctx.index - 1) in group_starts(ctx.depth, self.num_blocks)

    def __repr__(self) -> str:
        return f"BlockAttentionResiduals(num_blocks={self.num_blocks})"
