"""The depth-pruning criteria of the literature, under their papers' names: which ``n`` blocks each removes.

Streams as in :mod:`~layerscale.analysis.pruning.block_ranking`: ``x^(l)`` enters block ``l`` (0-based), ``x^(L)``
leaves the last; ``T`` is the token the head reads (last token of a language model, class token or pooled features of a
classifier); ``d(a, b) = arccos(cos(a, b)) / π`` (:func:`~layerscale.analysis.measures.geometry.angular_distance`).

* ``gromov`` — Gromov et al. 2024, "The Unreasonable Ineffectiveness of the Deeper Layers", arXiv 2403.17887,
  their layer-pruning algorithm (§3.2, with the angular distance defined there): for ``n``,
  ``ℓ*(n) = argmin_ℓ E_X[d(x^(ℓ)_T, x^(ℓ+n)_T)]``; remove the ``n`` **contiguous** blocks ``ℓ* … ℓ* + n − 1``.
  The sets for different ``n`` need not be nested.
* ``block_influence`` — Men et al. 2024, "ShortGPT: Layers in Large Language Models are More Redundant Than You
  Expect", arXiv 2403.03853, the Block Influence definition (§3):
  ``BI_l = 1 − E_{X,t}[cos(x^(l)_t, x^(l+1)_t)]`` over **every** token ``t``; remove the ``n`` blocks of lowest
  ``BI``, contiguous or not.
* ``angular`` — the single-block angular distance ``E_X[d(x^(l)_T, x^(l+1)_T)]`` (Gromov et al.'s distance with
  ``n = 1``, read per block); remove the ``n`` blocks of lowest distance, contiguous or not. This is *not* Gromov
  et al.'s span criterion (that is ``gromov``): ranking single blocks ignores what blocks do together.
* ``ablation`` — ``E_X[loss with block l replaced by the identity] − E_X[loss]``; remove the ``n`` blocks whose
  removal alone costs least (the layer-pruning measure of Gromov et al. 2024 and Sun et al. 2025,
  arXiv 2502.05795).
* ``gamma`` — the library's own LayerScale criterion (:mod:`~layerscale.analysis.pruning.gamma_score`): the ``n`` blocks
  whose γ-scaled branches move the stream least.

For every criterion but ``gromov`` the blocks are ranked by their score, lower first, ties broken towards the
deeper block (the usual choice of depth pruning), so the removal sets grow by one block per ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..removal.span_removal import best_span
from .block_ranking import StreamMeasures

__all__ = ["CRITERIA", "SCORE_CRITERIA", "CriterionRanking", "lowest_blocks", "parse_criteria", "ranking_of"]

#: Every criterion, in the order tables list them.
CRITERIA = ("gromov", "block_influence", "angular", "ablation", "gamma")
#: The criteria that score single blocks (their removal sets are the ``n`` lowest scores).
SCORE_CRITERIA = ("block_influence", "angular", "ablation", "gamma")


def parse_criteria(value: str | Sequence[str], allowed: Sequence[str] = CRITERIA, option: str = "--by") -> list[str]:
    """``"gromov,block_influence"`` (or a sequence) -> ``["gromov", "block_influence"]``: each name known, none
    repeated. A one-line ``ValueError`` naming the value otherwise."""
    names = [part.strip() for part in value.split(",")] if isinstance(value, str) else list(value)
    if not names or any(not isinstance(n, str) for n in names):
        raise ValueError(f"{option} {value!r}: expected comma-separated criteria from {', '.join(allowed)}")
    for name in names:
        if name not in allowed:
            raise ValueError(f"{option} {name!r}: unknown criterion; expected one of {', '.join(allowed)}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{option} {value!r}: criterion {repeated[0]!r} given twice")
    return names


def lowest_blocks(scores: Sequence[float], n: int) -> list[int]:
    """The ``n`` blocks of lowest score (ties: the deeper first), in increasing index order."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n < len(scores):
        raise ValueError(f"the number of blocks to remove must be an int in [1, {len(scores) - 1}] (at least one of "
                         f"the {len(scores)} blocks must remain), got {n!r}")
    order = sorted(range(len(scores)), key=lambda i: (scores[i], -i))
    return sorted(order[:n])


@dataclass
class CriterionRanking:
    """One criterion's view of a model: ``scores`` per block (score criteria) or the mean head-token distance
    matrix ``distance[i][j] = E_X[d(x^(i)_T, x^(j)_T)]`` (``gromov``)."""

    name: str
    depth: int
    scores: list[float] | None = None
    distance: torch.Tensor | None = None

    def blocks(self, n: int) -> list[int]:
        """The 0-based blocks this criterion removes to take ``n`` blocks out (module docstring)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n < self.depth:
            raise ValueError(f"n must be an int in [1, {self.depth - 1}] (at least one of the {self.depth} blocks "
                             f"must remain), got {n!r}")
        if self.name == "gromov":
            start, _ = best_span(self.distance, n)
            return list(range(start, start + n))
        return lowest_blocks(self.scores, n)

    def order(self) -> list[int]:
        """Score criteria: every block, most removable first (the greedy order of the set-variant depth)."""
        if self.scores is None:
            raise ValueError(f"criterion {self.name!r} removes spans, not blocks in an order; use a score criterion "
                             f"({', '.join(SCORE_CRITERIA)})")
        return sorted(range(self.depth), key=lambda i: (self.scores[i], -i))


def ranking_of(name: str, measures: StreamMeasures, gamma: Sequence[float] | None = None) -> CriterionRanking:
    """The :class:`CriterionRanking` of criterion ``name`` from one pass's :class:`StreamMeasures` (with ablation
    measured for ``"ablation"``; ``gamma`` the :func:`~layerscale.analysis.pruning.gamma_score.gamma_scores` for
    ``"gamma"``). A one-line ``ValueError`` for an unknown name, a missing input or non-finite scores."""
    depth = measures.depth
    distance = None
    if name == "gromov":
        distance = measures.head_distance.mean(dim=0)
        scores = None
    elif name == "angular":
        index = torch.arange(depth)
        scores = measures.head_distance[:, index, index + 1].mean(dim=0)
    elif name == "block_influence":
        scores = measures.block_influence.mean(dim=0)
    elif name == "ablation":
        if measures.ablation_loss is None:
            raise ValueError("the ablation criterion needs the streams measured with ablation=True")
        scores = measures.ablation_loss.mean(dim=0) - measures.clean_loss.mean()
    elif name == "gamma":
        if gamma is None or len(gamma) != depth:
            raise ValueError(f"the gamma criterion needs one gamma score per block ({depth}), got "
                             f"{None if gamma is None else len(gamma)}")
        scores = torch.as_tensor(gamma, dtype=torch.float64)
    else:
        raise ValueError(f"unknown criterion {name!r}; expected one of {', '.join(CRITERIA)}")
    values = distance if scores is None else scores
    if not torch.isfinite(values).all():
        raise ValueError(f"the {name} scores are not finite (NaN or infinite weights or streams)")
    return CriterionRanking(name, depth, None if scores is None else [float(s) for s in scores], distance)
