import csv
import math

import pytest

from layerscale.study.design.grid import StudySpec
from layerscale.stats.intervals import mean_interval
from layerscale.study.report.results import Metric, cell_results, collect_run, results_rows, verdict, write_tables
from study_helpers import TINY_BASE, write_fake_run

ACCURACY = Metric.for_language_model(False)


def _study(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3), target=80.0)
    chosen = {("prenorm", 2): 1e-3, ("layerscale", 2): 3e-3}
    tests = {("prenorm", 1e-3): [0.80, 0.82, 0.81], ("layerscale", 3e-3): [0.86, 0.87, 0.89],
             ("layerscale", 1e-3): [0.70, 0.90, 0.75]}
    runs = spec.final_runs(tmp_path, chosen)
    for r in runs:
        acc = tests[(r.method, r.lr)][r.seed]
        write_fake_run(r.run_dir, [acc - 0.1, acc], [1.0, 0.5], test_accuracy=acc)
    return spec, chosen, [collect_run(r, ACCURACY, spec.target) for r in runs]


def test_collect_run_reads_the_test_evaluation_validation_and_steps_to_target(tmp_path):
    spec, _, results = _study(tmp_path)
    r = {x.run_id: x for x in results}["layerscale-d2-lr0.003-s2"]
    assert r.test == pytest.approx(89.0) and r.val_last == pytest.approx(89.0) and r.val_best == pytest.approx(89.0)
    assert r.steps_to_target == 20  # 79 % at step 10 does not reach 80 %, 89 % at step 20 does
    early = {x.run_id: x for x in results}["layerscale-d2-lr0.001-s1"]
    assert early.steps_to_target == 10  # 80 % at step 10
    never = {x.run_id: x for x in results}["layerscale-d2-lr0.001-s0"]
    assert never.steps_to_target is None  # 60 %, then 70 %


def test_cells_carry_t_intervals_and_paired_differences(tmp_path):
    spec, chosen, results = _study(tmp_path)
    cells = {(c.table, c.method): c for c in cell_results(spec, results, chosen)}
    tuned_ls = cells[("tuned", "layerscale")]
    assert tuned_ls.lr == 3e-3 and tuned_ls.runs == 3
    expected = mean_interval([86.0, 87.0, 89.0])
    assert tuned_ls.test.mean == pytest.approx(expected.mean) and tuned_ls.test.low == pytest.approx(expected.low)
    # paired by seed against prenorm at its own tuned rate: differences 6, 5, 8
    diff = mean_interval([6.0, 5.0, 8.0])
    assert tuned_ls.diff.mean == pytest.approx(diff.mean) and tuned_ls.diff.high == pytest.approx(diff.high)
    assert verdict(tuned_ls.diff, True) == "better"
    shared_ls = cells[("shared", "layerscale")]  # at 1e-3: differences -10, 8, -6: within noise
    assert shared_ls.lr == 1e-3 and verdict(shared_ls.diff, True) == "within noise"
    assert cells[("tuned", "prenorm")].diff is None


def test_verdicts_follow_the_metric_direction():
    better_loss = mean_interval([-0.2, -0.3, -0.25])  # bits per byte went down
    assert verdict(better_loss, higher_is_better=False) == "better"
    assert verdict(better_loss, higher_is_better=True) == "worse"
    assert verdict(mean_interval([1.0]), True) == "n < 3"
    assert verdict(mean_interval([1.0, 2.0]), True) == "n < 3"


def test_tables_are_written_with_intervals_and_chosen_rates(tmp_path):
    spec, chosen, results = _study(tmp_path)
    cells = cell_results(spec, results, chosen)
    paths = write_tables(tmp_path, results, cells, ACCURACY, "# table\n")
    with open(paths["results_csv"]) as f:
        rows = list(csv.DictReader(f))
    row = next(r for r in rows if r["table"] == "tuned" and r["method"] == "layerscale")
    assert float(row["lr"]) == 3e-3 and row["verdict"] == "better"
    for key in ("test_mean", "test_ci_low", "test_ci_high", "diff_mean", "diff_ci_low", "diff_ci_high"):
        assert math.isfinite(float(row[key]))
    with open(paths["runs_csv"]) as f:
        assert len(list(csv.DictReader(f))) == len(results)
    assert results_rows(cells, ACCURACY)[0]["metric"] == "test accuracy (%)"


def test_a_pending_run_has_no_test_metric_and_a_diverged_one_is_counted(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0, 1), TINY_BASE)
    runs = spec.final_runs(tmp_path, {})
    write_fake_run(runs[1].run_dir, [0.3], [2.0], status="diverged", diverged_step=7)
    results = [collect_run(r, ACCURACY) for r in runs]
    assert results[0].status == "pending" and results[0].test is None
    cell = cell_results(spec, results, {})[0]
    assert cell.diverged == 1 and cell.test is None


def test_language_models_are_scored_in_bits_per_byte():
    metric = Metric.for_language_model(True)
    assert not metric.higher_is_better
    assert metric.from_record({"loss": math.log(2) * 1.5}) == pytest.approx(1.5)


def test_a_zero_width_interval_is_no_claim():
    same = mean_interval([-0.8, -0.8, -0.8])  # three seeds, the same difference: no estimate of the noise
    assert same.low == same.high and verdict(same, True) == "no spread"
