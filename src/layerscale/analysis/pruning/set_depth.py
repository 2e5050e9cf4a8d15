"""Effective depth, set variant: the fewest blocks left after removing the largest set of blocks (contiguous or
not) whose joint removal keeps the loss within δ of the full model's.

With ``Δ(S) = E_X[loss with the blocks of S replaced by identities] − E_X[loss]`` (nats) for a set ``S`` of the
``L`` blocks,

    ``D^set_δ = L − max{|S| : S ⊆ {1 … L}, Δ(S) ≤ δ}``

(``S`` may be every block, as ``D_δ``'s span may: the embedding then feeds the head directly). Every span is a set,
so ``D^set_δ ≤ D_δ``.

Why it exists beside the contiguous ``D_δ`` (:mod:`~layerscale.analysis.summary`): ``D_δ`` removes one contiguous
span, the pruning of Gromov et al. 2024 (arXiv 2403.17887); but ShortGPT (Men et al. 2024, arXiv 2403.03853) and
any model grown by inserting identity blocks between others have their removable blocks spread out. A model grown
from 8 to 11 blocks at ``γ = 0`` (:func:`layerscale.surgery.grow`) computes exactly its 8-block source; no span of
more than one of its new blocks is removable, so ``D_δ`` says 10, while ``D^set_δ`` says 8.

Two searches:

* **greedy** (any ``L``): rank the blocks by a criterion (:mod:`~layerscale.analysis.pruning.criteria`; by default
  ``ablation``, the measured cost of each block alone) and remove them in that order while the loss stays within
  δ: with ``S_j`` the ``j`` most removable blocks and ``k₀ = L − D_δ`` the blocks the contiguous span already
  removes, ``k* = max{k > k₀ : Δ(S_j) ≤ δ for every k₀ < j ≤ k}`` (0 when ``Δ(S_{k₀+1}) > δ``), evaluated
  prefix after prefix — in passes of 4, 8, 16, … prefixes, one clean capture per pass — and stopped at the first
  that breaks δ. A model with no removable block (``Δ(S_1)`` is a single ablation, already measured) or one
  whose span already removes every block costs nothing. ``k*`` is a lower bound on the largest removable set, and
  so is ``k₀``: the analysis reports ``L − max(k*, k₀)``, an upper bound on ``D^set_δ`` never above ``D_δ``.
* **exhaustive** (``L ≤`` :data:`EXHAUSTIVE_MAX_DEPTH`): every non-empty ``S`` (``2^L − 1`` sets;
  each costs the kept blocks after ``min S``, about ``(L − 2)·2^(L−1)`` block evaluations per batch in all — 96
  forward passes' worth at ``L = 8``, 1,700 at ``L = 12``). ``"auto"`` searches exhaustively when
  ``L ≤`` :data:`AUTO_EXHAUSTIVE_DEPTH` and greedily otherwise.

Bootstrap: each replicate recomputes the count from the per-example losses of the sets evaluated (greedy: the
prefixes up to the first that broke δ on all examples, so a replicate can reach at most one prefix further;
exhaustive: every set, each replicate its own maximum).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from ..eval_data.evaluation import EvalSet
from ..removal.ablation import LossTotals
from ..removal.set_removal import set_losses
from ..removal.streams import BlockStack
from .criteria import CriterionRanking

__all__ = ["AUTO_EXHAUSTIVE_DEPTH", "EXHAUSTIVE_MAX_DEPTH", "SET_SEARCHES", "SetDepthSearch", "greedy_removable",
           "most_removable", "all_subsets", "resolve_search", "search_reusing_removals", "search_set_depth"]

SET_SEARCHES = ("auto", "greedy", "exhaustive")
#: The largest depth the exhaustive search accepts (``2^12 − 1 = 4095`` sets).
EXHAUSTIVE_MAX_DEPTH = 12
#: ``"auto"`` searches exhaustively up to this depth (``2^8 − 1 = 255`` sets), greedily above.
AUTO_EXHAUSTIVE_DEPTH = 8


def resolve_search(search: str, depth: int) -> str:
    """``"greedy"`` or ``"exhaustive"`` for ``search`` at ``depth``; a one-line ``ValueError`` naming the value."""
    if search not in SET_SEARCHES:
        raise ValueError(f"set_search must be one of {', '.join(SET_SEARCHES)}, got {search!r}")
    if search == "auto":
        return "exhaustive" if depth <= AUTO_EXHAUSTIVE_DEPTH else "greedy"
    if search == "exhaustive" and depth > EXHAUSTIVE_MAX_DEPTH:
        raise ValueError(f"set_search 'exhaustive' needs L <= {EXHAUSTIVE_MAX_DEPTH} blocks (2^L - 1 sets), got "
                         f"L = {depth}; use 'greedy'")
    return search


def greedy_removable(prefix_delta: torch.Tensor, tolerance: float) -> torch.Tensor:
    """``k*`` over the last dimension of ``prefix_delta`` (``(..., K)``: ``Δ(S_1) … Δ(S_K)``): how many leading
    entries are ``≤ δ`` (NaN never is). A long tensor of the leading shape."""
    delta = torch.as_tensor(prefix_delta, dtype=torch.float64)
    within = (delta <= tolerance).long()
    return within.cumprod(dim=-1).sum(dim=-1)


def most_removable(set_delta: torch.Tensor, sizes: Sequence[int], tolerance: float) -> torch.Tensor:
    """``max{|S| : Δ(S) ≤ δ}`` over the last dimension of ``set_delta`` (``(..., S)``, set ``i`` of size
    ``sizes[i]``), 0 when no set is within δ. A long tensor of the leading shape."""
    delta = torch.as_tensor(set_delta, dtype=torch.float64)
    size = torch.as_tensor(list(sizes), dtype=torch.long)
    if delta.shape[-1] != size.numel():
        raise ValueError(f"most_removable: {delta.shape[-1]} set losses for {size.numel()} set sizes")
    within = delta <= tolerance
    return torch.where(within, size, torch.zeros_like(size)).amax(dim=-1) if size.numel() else \
        torch.zeros(delta.shape[:-1], dtype=torch.long)


def all_subsets(depth: int) -> list[tuple[int, ...]]:
    """Every non-empty set of the blocks ``0 … depth − 1``, by size then lexicographically."""
    return [s for k in range(1, depth + 1) for s in itertools.combinations(range(depth), k)]


@dataclass
class SetDepthSearch:
    """What :func:`search_set_depth` found: the sets evaluated (0-based), their per-example loss minus the full
    model's (``delta``, ``(examples, sets)``), the search used, the criterion order (greedy) and the removable
    count ``k`` with the set achieving it (``removed``, 0-based; empty when none)."""

    search: str
    criterion: str | None
    sets: list[tuple[int, ...]]
    delta: torch.Tensor
    removable: int
    removed: list[int]
    start: int = 0

    def replicate_removable(self, boot: Callable[[torch.Tensor], torch.Tensor], tolerance: float) -> torch.Tensor:
        """The removable count in each bootstrap replicate (``boot`` maps per-example values to replicate means)."""
        if not self.sets:
            return torch.zeros(boot(torch.zeros(self.delta.shape[0], 1)).shape[0], dtype=torch.long)
        means = boot(self.delta)
        if self.search == "greedy":
            count = greedy_removable(means, tolerance)
            return torch.where(count > 0, count + self.start, torch.zeros_like(count))
        return most_removable(means, [len(s) for s in self.sets], tolerance)


def search_set_depth(stack: BlockStack, evalset: EvalSet, clean_loss: torch.Tensor, tolerance: float, *,
                     search: str, order: Sequence[int] | None, criterion: str | None, device: Any, batch_size: int,
                     known: dict[tuple[int, ...], torch.Tensor] | None = None, start: int = 0, chunk: int = 4,
                     step: Callable[[], None] = lambda: None) -> SetDepthSearch:
    """Search the largest removable set (module docstring). ``clean_loss``: the full model's per-example loss
    ``(examples,)``; ``order``: the greedy order (most removable first; needed for ``"greedy"``); ``known``:
    per-example losses already measured for some sets (e.g. the single-block ablations), reused instead of run;
    ``start``: blocks known removable otherwise (``k₀``), the greedy prefixes start at ``k₀ + 1``; ``chunk``: the
    greedy prefixes of the first pass over the data (doubled each pass)."""
    depth = stack.depth
    search = resolve_search(search, depth)
    known = dict(known or {})

    def measure(sets: list[tuple[int, ...]]) -> torch.Tensor:
        missing = [s for s in sets if s not in known]
        if missing:
            _, removed, _ = set_losses(stack, evalset, missing, device=device, batch_size=batch_size, step=step)
            for s, column in zip(missing, removed.per_example()[0].unbind(dim=1)):
                known[s] = column
        return torch.stack([known[s] for s in sets], dim=1) - clean_loss[:, None]

    if search == "exhaustive":
        sets = all_subsets(depth)
        delta = measure(sets)
        mean = delta.mean(dim=0)
        best = int(most_removable(mean, [len(s) for s in sets], tolerance))
        removed: list[int] = []
        if best:
            candidates = [i for i, s in enumerate(sets) if len(s) == best and mean[i] <= tolerance]
            removed = list(sets[min(candidates, key=lambda i: (float(mean[i]), i))])
        return SetDepthSearch(search, criterion, sets, delta, best, removed)
    if order is None or sorted(order) != list(range(depth)):
        raise ValueError(f"the greedy set search needs an order of the {depth} blocks, got {order!r}")
    sets, columns = [], []
    while start + len(sets) < depth:
        k = start + len(sets)
        batch = [tuple(sorted(order[:j])) for j in range(k + 1, min(depth, k + chunk) + 1)]
        if batch[0] in known:  # measured already (a single ablation, an early exit): check it before running more
            batch = [batch[0]]
        else:
            chunk *= 2
        delta = measure(batch)
        failed = False
        for s, column in zip(batch, delta.unbind(dim=1)):
            sets.append(s)
            columns.append(column)
            if not float(column.mean()) <= tolerance:
                failed = True
                break
        if failed:
            break
    if not sets:
        return SetDepthSearch(search, criterion, [], torch.zeros(len(evalset), 0), 0, [], start)
    delta = torch.stack(columns, dim=1)
    count = int(greedy_removable(delta.mean(dim=0), tolerance))
    return SetDepthSearch(search, criterion, sets, delta, start + count if count else 0,
                          list(sets[count - 1]) if count else [], start)


def search_reusing_removals(stack: BlockStack, evalset: EvalSet, clean_loss: torch.Tensor, tolerance: float,
                            search: str, criterion: str, ablation: LossTotals, early_exit: LossTotals,
                            spans_run: tuple[list[tuple[int, int]], LossTotals], geometry: dict[str, torch.Tensor],
                            device: Any, batch_size: int, span_removable: int) -> SetDepthSearch:
    """:func:`search_set_depth` after a depth analysis's first passes, reusing every removal they measured: the
    single-block ablations, the early exits (the removal of every block from ``k`` on) and the removal curve's spans
    (``spans_run``: the spans run and their losses); the greedy order is ``criterion``'s ranking (``ablation`` from
    the measured ablations, ``angular`` / ``block_influence`` from the mean ``geometry``, ``gamma`` measured here),
    and the greedy search starts beyond the ``span_removable`` blocks the contiguous span already removes."""
    depth = stack.depth
    ab_loss, ex_loss = ablation.per_example()[0], early_exit.per_example()[0]
    known = {(block,): ab_loss[:, block] for block in range(depth)}
    known.update({tuple(range(keep, depth)): ex_loss[:, keep] for keep in range(depth)})
    to_run, removed = spans_run
    if to_run:
        ran = removed.per_example()[0]
        known.update({tuple(range(s, s + n)): ran[:, i] for i, (s, n) in enumerate(to_run)})
    if criterion == "ablation":
        scores = ab_loss.mean(dim=0) - clean_loss.mean()
    elif criterion == "gamma":
        from .gamma_score import gamma_scores

        scores = torch.tensor(gamma_scores(stack.model, (x.to(device) for x, _ in evalset.batches(batch_size))))
    else:
        scores = geometry["angular" if criterion == "angular" else "influence"]
    order = CriterionRanking(criterion, depth, [float(v) for v in scores]).order()
    return search_set_depth(stack, evalset, clean_loss, tolerance, search=search, order=order, criterion=criterion,
                            device=device, batch_size=batch_size, known=known, start=span_removable)
