"""The two-level bootstrap interval (seeds × test examples) of each primary comparison, from the final runs'
per-example test outcomes (:mod:`layerscale.train.test_outcomes`, :mod:`layerscale.study.sampling_noise`)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ..train.test_outcomes import read_test_outcomes
from .grid import RunSpec, StudySpec
from .results import CellResult, Metric
from .sampling_noise import bootstrap_interval, two_level_bootstrap
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
    0, so a rebuild gives the same interval); a cell whose runs lack outcomes keeps ``None``."""
    if spec.bootstrap <= 0:
        return cells
    runs = {(r.method, r.depth, r.lr, r.seed): r for r in finals}
    scale = 100.0 if metric.classification else 1.0 / math.log(2)
    out = []
    for c in cells:
        if c.family != PRIMARY or c.table != "tuned" or c.lr is None:
            out.append(c)
            continue
        ref_lr = chosen.get((spec.reference_method, c.depth))
        rows, ref_rows = [], []
        for seed in spec.seeds_for(c.method, c.depth):
            mine = _outcomes(runs, (c.method, c.depth, c.lr, seed))
            theirs = _outcomes(runs, (spec.reference_method, c.depth, ref_lr, seed))
            if mine is not None and theirs is not None and len(mine) == len(theirs):
                rows.append(mine)
                ref_rows.append(theirs)
        if len(rows) < 2:
            out.append(c)
            continue
        draws = two_level_bootstrap(rows, ref_rows, draws=spec.bootstrap, seed=0) * scale
        out.append(replace(c, bootstrap=bootstrap_interval(draws)))
    return out
