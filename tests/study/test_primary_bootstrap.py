"""The primary family's bootstrap interval resamples exactly the seeds of the row's t-interval, or is absent."""

from dataclasses import replace

import pytest
import torch

from layerscale.study.design.grid import RunSpec, StudySpec
from layerscale.stats.intervals import mean_interval, paired_interval
from layerscale.study.report.primary_bootstrap import with_bootstrap
from layerscale.study.report.results import CellResult, Metric
from layerscale.stats.sampling_noise import bootstrap_interval, two_level_bootstrap
from layerscale.study.report.verdicts import PRIMARY
from layerscale.train.records.test_outcomes import write_test_outcomes
from study_helpers import TINY_BASE

SEEDS = (0, 1, 2)
LR = 1e-3


def _outcomes(method: str, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(17 * seed + (1 if method == "layerscale" else 0))
    return torch.rand(40, generator=generator) < (0.8 if method == "layerscale" else 0.7)


def _setup(tmp_path, without: tuple[tuple[str, int], ...] = ()):
    spec = StudySpec(("prenorm", "layerscale"), (4,), SEEDS, TINY_BASE, bootstrap=300)
    finals, tests = [], {}
    for method in ("prenorm", "layerscale"):
        for seed in SEEDS:
            run_dir = tmp_path / f"{method}-s{seed}"
            run_dir.mkdir()
            values = _outcomes(method, seed)
            tests[(method, seed)] = 100.0 * values.float().mean().item()
            if (method, seed) not in without:
                write_test_outcomes(run_dir, "correct", values)
            finals.append(RunSpec(method, 4, LR, seed, "final", {"run": {"out_dir": str(run_dir)}}))
    ref = {s: tests[("prenorm", s)] for s in SEEDS}
    mine = {s: tests[("layerscale", s)] for s in SEEDS}
    cells = [CellResult("tuned", "prenorm", 4, LR, 3, 0, mean_interval(list(ref.values())), None, None, 0, None,
                        None, seeds=SEEDS),
             CellResult("tuned", "layerscale", 4, LR, 3, 0, mean_interval(list(mine.values())),
                        paired_interval(mine, ref), None, 0, None, None, seeds=SEEDS, family=PRIMARY)]
    chosen = {("prenorm", 4): LR, ("layerscale", 4): LR}
    return spec, cells, finals, chosen


def test_the_bootstrap_covers_every_paired_seed(tmp_path):
    spec, cells, finals, chosen = _setup(tmp_path)
    out = with_bootstrap(spec, cells, finals, Metric.for_language_model(False), chosen)
    rows = [_outcomes("layerscale", s).double() for s in SEEDS]
    ref_rows = [_outcomes("prenorm", s).double() for s in SEEDS]
    expected = bootstrap_interval(two_level_bootstrap(rows, ref_rows, draws=300, seed=0) * 100.0)
    assert out[1].bootstrap == pytest.approx(expected)
    assert out[0].bootstrap is None  # the reference compares with nothing


@pytest.mark.parametrize("missing", [("layerscale", 0), ("prenorm", 2)])
def test_a_seed_without_outcomes_leaves_no_bootstrap_rather_than_one_over_the_other_seeds(tmp_path, missing):
    spec, cells, finals, chosen = _setup(tmp_path, without=(missing,))
    out = with_bootstrap(spec, cells, finals, Metric.for_language_model(False), chosen)
    assert out[1].bootstrap is None


def test_two_paired_seeds_get_no_bootstrap_as_they_get_no_t_interval(tmp_path):
    spec, cells, finals, chosen = _setup(tmp_path)
    two = (0, 1)
    cells = [replace(cell, seeds=two) for cell in cells]
    out = with_bootstrap(spec, cells, finals, Metric.for_language_model(False), chosen)
    assert cells[1].seeds == two and out[1].bootstrap is None
