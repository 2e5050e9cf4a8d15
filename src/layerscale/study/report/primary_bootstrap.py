"""The two-level bootstrap interval (seeds × test examples) of each primary comparison, from the final runs'
per-example test outcomes (:mod:`layerscale.train.records.test_outcomes`, :mod:`layerscale.stats.sampling_noise`)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ...train.records.test_outcomes import read_test_outcomes
from ..design.grid import RunSpec, StudySpec
from .results import CellResult, Metric
from ...stats.intervals import MIN_VALUES_FOR_INTERVAL
from ...stats.sampling_noise import bootstrap_interval, two_level_bootstrap
from .verdicts import PRIMARY

__all__ = ["with_bootstrap"]


def _outcomes(runs: dict[tuple[str, int, float, int], RunSpec], key) -> list[float] | None:
    run = runs.get(key)
    if run is None:
        return None
    found = read_test_outcomes(Path(run.run_dir))
    return found[1] if found else None


def with_bootstrap(spec: StudySpec, cells: list[CellResult], finals: list[RunSpec], metric: Metric,
                   chosen: dict) -> list[CellResult]:
    """``cells`` with ``bootstrap`` set on the primary family's cell comparisons (``spec.bootstrap`` draws, seed
    0, so a rebuild gives the same interval).

    The bootstrap resamples exactly the seeds of the row's paired t-interval (the seeds both the method and the
    reference finished). A comparison any of whose paired runs lacks per-example outcomes keeps ``None``: runs
    reused unchanged from a study that predates ``test_outcomes.json`` have none, and an interval over the other
    seeds alone would describe a different sample than the row it sits beside."""
    if spec.bootstrap <= 0:
        return cells
    runs = {(r.method, r.depth, r.lr, r.seed): r for r in finals}
    scale = 100.0 if metric.classification else 1.0 / math.log(2)
    reference_seeds = {c.depth: set(c.seeds) for c in cells
                       if c.table == "tuned" and c.method == spec.reference_method}
    out = []
    for c in cells:
        if c.family != PRIMARY or c.table != "tuned" or c.lr is None:
            out.append(c)
            continue
        ref_lr = chosen.get((spec.reference_method, c.depth))
        paired = [s for s in c.seeds if s in reference_seeds.get(c.depth, ())]
        rows = [_outcomes(runs, (c.method, c.depth, c.lr, seed)) for seed in paired]
        ref_rows = [_outcomes(runs, (spec.reference_method, c.depth, ref_lr, seed)) for seed in paired]
        complete = all(r is not None and q is not None and len(r) == len(q) for r, q in zip(rows, ref_rows))
        if len(paired) < MIN_VALUES_FOR_INTERVAL or not complete:  # exactly the seeds of the row's t-interval
            out.append(c)
            continue
        draws = two_level_bootstrap(rows, ref_rows, draws=spec.bootstrap, seed=0) * scale
        out.append(replace(c, bootstrap=bootstrap_interval(draws)))
    return out
