"""Several pruning criteria side by side: the loss after each criterion's removal of ``n = 1 … N`` blocks, with
bootstrap intervals — one table and one removal curve per criterion.

The criteria (:mod:`~layerscale.analysis.pruning.criteria`: ``gromov``, ``block_influence``, ``angular``, ``ablation``,
``gamma``) choose their blocks on the **scoring** set (a calibration split; the evaluation set itself when none is
given), one pass of :func:`~layerscale.analysis.pruning.block_ranking.measure_streams`. Every chosen set is then removed
on the cached streams of the **evaluation** set (:mod:`~layerscale.analysis.removal.set_removal`), per example, and the
nonparametric bootstrap over the evaluation examples (:mod:`layerscale.stats.bootstrap`, percentile intervals via
:class:`~layerscale.analysis.intervals.IntervalTable`) gives each mean loss, accuracy and loss change
``Δ(n) = E_X[loss without the n blocks] − E_X[loss]`` (paired: one replicate draws the same examples for both) its
interval. The sets are chosen once, so the intervals are conditional on that choice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch import nn

from ...stats.bootstrap import bootstrap_means, bootstrap_weights
from .block_ranking import measure_streams
from .criteria import CRITERIA, CriterionRanking, parse_criteria, ranking_of
from ..device import analysis_device
from ..eval_data.evaluation import as_eval_set
from ..intervals import IntervalTable
from ..removal.set_removal import set_losses
from ..removal.streams import find_block_stack

__all__ = ["CriterionComparison", "CriterionCurve", "compare_criteria"]


@dataclass
class CriterionCurve:
    """One criterion's removal curve: ``sets[n − 1]`` (0-based blocks) removed for ``n`` blocks, and the mean
    ``loss``, ``accuracy`` and ``delta_loss`` (``Δ(n)``) with their ``[low, high]`` intervals; ``scores`` per block
    (``None`` for ``gromov``, which scores spans)."""

    criterion: str
    scores: list[float] | None
    sets: list[list[int]]
    loss: list[float]
    loss_interval: list[list[float]]
    accuracy: list[float]
    accuracy_interval: list[list[float]]
    delta_loss: list[float]
    delta_loss_interval: list[list[float]]


@dataclass
class CriterionComparison:
    """The full model's loss and accuracy with intervals, and one :class:`CriterionCurve` per criterion.
    ``outputs``: classes (classification) or vocabulary entries (language model); ``distance[i][j]``: the mean
    angular distance between depths ``i`` and ``j`` of the token the head reads (``readout``), on the scoring set;
    ``scoring``: ``"evaluation set"`` or ``"separate scoring set"``."""

    task: str
    readout: str
    outputs: int
    depth: int
    num_examples: int
    level: float
    clean_loss: float
    clean_loss_interval: list[float]
    clean_accuracy: float
    clean_accuracy_interval: list[float]
    curves: dict[str, CriterionCurve]
    distance: list[list[float]]
    scoring: str
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def criteria(self) -> list[str]:
        return list(self.curves)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> CriterionComparison:
        body = dict(raw)
        body["curves"] = {name: CriterionCurve(**curve) for name, curve in body["curves"].items()}
        return cls(**body)


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int {bound}, got {value!r}")
    return value


def compare_criteria(model: nn.Module, data: Any, criteria: str | Sequence[str], n_max: int, *,
                     scoring: Any = None, gamma: Sequence[float] | None = None,
                     device: str | torch.device = "cpu", batch_size: int = 250, max_examples: int | None = 1000,
                     bootstrap: int = 1000, level: float = 0.95, seed: int = 0,
                     call: Callable[[torch.Tensor], Any] | None = None) -> CriterionComparison:
    """Remove ``n = 1 … n_max`` blocks of ``model`` by each of ``criteria`` (comma-separated or a sequence) and
    measure the loss on ``data`` (module docstring). ``scoring``: the data the criteria choose on (default
    ``data``); ``gamma``: precomputed gamma scores (else measured on ``scoring`` when ``"gamma"`` is asked for).
    Data in any form :func:`~layerscale.analysis.eval_data.evaluation.as_eval_set` accepts, at most ``max_examples`` of
    each. The model must be on ``device``; it is put in eval mode and restored.

    Raises a one-line ``ValueError`` for an unknown criterion, ``n_max`` outside ``[1, L − 1]``, a bad
    ``bootstrap`` / ``level``, data that does not fit the model, or non-finite scores."""
    names = parse_criteria(criteria, CRITERIA, "criteria")
    device = analysis_device(device)
    stack = find_block_stack(model, call)
    depth = stack.depth
    if depth < 2:
        raise ValueError(f"{stack.model_name} has {depth} block; removing blocks needs at least 2")
    n_max = _check_int("n (blocks to remove)", n_max, 1, depth - 1)
    _check_int("batch_size", batch_size, 1)
    _check_int("bootstrap", bootstrap, 2)
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    if "gamma" in names and gamma is None:
        from .gamma_score import check_gamma_criterion

        check_gamma_criterion(stack.model)
    evalset = as_eval_set(data, max_examples)
    scoring_set = evalset if scoring is None else as_eval_set(scoring, max_examples)
    model = stack.model
    was_training = model.training
    model.eval()
    try:
        measures = measure_streams(model, scoring_set, ablation="ablation" in names, device=device,
                                   batch_size=batch_size, max_examples=None, call=call)
        if "gamma" in names and gamma is None:
            from .gamma_score import gamma_scores

            gamma = gamma_scores(model, (x.to(device) for x, _ in scoring_set.batches(batch_size)))
        rankings: dict[str, CriterionRanking] = {name: ranking_of(name, measures, gamma) for name in names}
        chosen = {name: [tuple(r.blocks(n)) for n in range(1, n_max + 1)] for name, r in rankings.items()}
        unique = sorted({s for sets in chosen.values() for s in sets}, key=lambda s: (len(s), s))
        clean, removed, outputs = set_losses(stack, evalset, unique, device=device, batch_size=batch_size)
    finally:
        model.train(was_training)
    clean_loss_e, clean_acc_e = (t[:, 0] for t in clean.per_example())
    if not bool(torch.isfinite(clean_loss_e).all()):
        raise ValueError(f"{stack.model_name}: the evaluation loss is not finite; a criterion comparison needs a "
                         "finite loss")
    set_loss, set_acc = removed.per_example()
    column = {s: i for i, s in enumerate(unique)}
    weights = bootstrap_weights(len(evalset), bootstrap, seed)
    intervals = IntervalTable(level)

    def boot(values: torch.Tensor) -> torch.Tensor:
        return bootstrap_means(values, weights)

    clean_loss_iv = intervals.add("clean_loss", boot(clean_loss_e))
    clean_acc_iv = intervals.add("clean_accuracy", boot(clean_acc_e))
    curves = {}
    for name in names:
        cols = [column[s] for s in chosen[name]]
        loss, acc = set_loss[:, cols], set_acc[:, cols]
        delta = loss - clean_loss_e[:, None]
        curves[name] = CriterionCurve(
            criterion=name, scores=rankings[name].scores, sets=[list(s) for s in chosen[name]],
            loss=loss.mean(dim=0).tolist(), loss_interval=intervals.add(f"{name}/loss", boot(loss)),
            accuracy=acc.mean(dim=0).tolist(), accuracy_interval=intervals.add(f"{name}/accuracy", boot(acc)),
            delta_loss=delta.mean(dim=0).tolist(), delta_loss_interval=intervals.add(f"{name}/delta", boot(delta)))
    return CriterionComparison(
        task=measures.task, readout=measures.readout, outputs=outputs, depth=depth, num_examples=len(evalset),
        level=float(level), clean_loss=float(clean_loss_e.mean()), clean_loss_interval=clean_loss_iv,
        clean_accuracy=float(clean_acc_e.mean()), clean_accuracy_interval=clean_acc_iv, curves=curves,
        distance=measures.head_distance.mean(dim=0).tolist(),
        scoring="evaluation set" if scoring is None else "separate scoring set",
        settings={"n_max": n_max, "bootstrap": bootstrap, "seed": seed, "batch_size": batch_size,
                  "scoring_examples": len(scoring_set)})
