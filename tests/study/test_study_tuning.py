import math

import pytest

from layerscale.study.grid import StudySpec
from layerscale.study.results import Metric
from layerscale.study.study import StudyPlan, _tune
from layerscale.study.tuning import rung_steps, run_score, select
from study_helpers import TINY_BASE, write_fake_run


@pytest.mark.parametrize("total, n, expected", [
    (100, 3, [25]),            # 3 rates, eta 3: one rung, one survivor
    (100, 5, [25, 75]),        # 5 -> 2 -> 1
    (100, 9, [25, 75]),        # 9 -> 3 -> 1
    (100, 1, []),              # nothing to tune
    (10, 30, [3, 8, 10]),      # 30 -> 10 -> 4 -> best; the last rung capped at the full budget
])
def test_rung_steps(total, n, expected):
    assert rung_steps(total, n, 0.25, 3) == expected


def test_select_keeps_the_best_and_breaks_ties_by_list_order():
    scores = {1e-3: 0.8, 3e-3: 0.9, 3e-4: 0.9, 1e-2: -math.inf}
    assert select(scores, (3e-4, 1e-3, 3e-3, 1e-2), 2) == (3e-4, 3e-3)


def test_run_score_reads_the_last_validation_evaluation_before_the_rung(tmp_path):
    write_fake_run(tmp_path / "r", [0.5, 0.7, 0.9], [1.0, 0.8, 0.6])
    assert run_score(tmp_path / "r", 25, True) == 0.7
    assert run_score(tmp_path / "r", 25, False) == -0.8
    assert run_score(tmp_path / "r", 5, True) == -math.inf
    assert run_score(tmp_path / "r", 25, True, diverged=True) == -math.inf


def _fake_pool(accuracy_of):
    """A process pool stand-in: each run 'trains' by writing validation accuracies that depend on its rate."""
    calls = []

    def pool(runs, desc):
        calls.append(sorted((r.method, r.depth, r.lr, r.stop_at_step) for r in runs))
        for r in runs:
            acc = accuracy_of(r.method, r.lr)
            write_fake_run(r.run_dir, [acc * k / 10 for k in range(1, r.stop_at_step // 10 + 1)],
                           [1.0] * (r.stop_at_step // 10), status="paused", step=r.stop_at_step)
        return []
    return pool, calls


def test_the_chosen_rate_is_the_one_with_the_best_validation_score(tmp_path):
    best = {"prenorm": 3e-3, "layerscale": 3e-4}
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1), TINY_BASE, lrs=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2))
    pool, calls = _fake_pool(lambda m, lr: 0.9 - abs(math.log10(lr) - math.log10(best[m])) / 10)
    plan = StudyPlan(total_steps=100, metric=Metric.for_language_model(False), data_description="fake")
    chosen, rungs, failures = _tune(spec, tmp_path, plan, pool)
    assert chosen == {("prenorm", 2): 3e-3, ("layerscale", 2): 3e-4} and not failures
    # rung 0: all 5 rates of both cells at 25 steps; rung 1: the best 2 of each at 75 steps
    assert [len(c) for c in calls] == [10, 4]
    assert {stop for *_, stop in calls[0]} == {25} and {stop for *_, stop in calls[1]} == {75}
    assert rungs[("prenorm", 2)][0].kept == (3e-3, 1e-3)
    assert (tmp_path / "tuning.json").is_file()


def test_a_diverged_rate_is_never_chosen(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(1e-3, 3e-3))
    plan = StudyPlan(total_steps=100, metric=Metric.for_language_model(False), data_description="fake")

    def pool(runs, desc):
        for r in runs:
            status = "diverged" if r.lr == 3e-3 else "paused"
            write_fake_run(r.run_dir, [0.99 if r.lr == 3e-3 else 0.5], [1.0], status=status, step=r.stop_at_step)
        return []
    chosen, _, _ = _tune(spec, tmp_path, plan, pool)
    assert chosen == {("prenorm", 2): 1e-3}


def test_a_cell_whose_rung_is_unfinished_has_no_tuned_rate_yet(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(1e-3, 3e-3))
    plan = StudyPlan(total_steps=100, metric=Metric.for_language_model(False), data_description="fake")

    def pool(runs, desc):  # only one of the two rates got to its rung (a study interrupted, rebuilt with --report-only)
        write_fake_run(runs[0].run_dir, [0.9], [1.0], status="paused", step=runs[0].stop_at_step)
        return []
    chosen, rungs, _ = _tune(spec, tmp_path, plan, pool)
    assert chosen == {("prenorm", 2): None} and rungs[("prenorm", 2)] == []
    assert spec.final_runs(tmp_path, chosen) and all(r.lr == spec.shared_lr for r in spec.final_runs(tmp_path, chosen))
