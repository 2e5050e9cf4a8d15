"""A study's stability tables (layerscale.study.report.stability_table) on planted run folders: a known learning-rate
window, a planted divergence, a planted loss spike, the spread ratio against the reference with its family, and the
CSV read back printing the same table."""

import json
import math

import pytest

from layerscale.stats.multiplicity import benjamini_hochberg, holm
from layerscale.stats.stability import pitman_morgan, seed_spread, spread_interval, spread_ratio
from layerscale.study.design.grid import StudySpec
from layerscale.study.report.results import Metric, cell_results, collect_run, write_tables
from layerscale.study.report.stability_table import (BOOTSTRAP_DRAWS, BOOTSTRAP_SEED, STABILITY_FILE, stability_lines,
                                                     stability_rows, stability_table_lines, stability_verdict)
from layerscale.study.report.verdicts import assign_families
from layerscale.study.run.csv_rows import read_rows
from study_helpers import TINY_BASE, write_fake_run

ACCURACY = Metric.for_language_model(False)
RATES = (1e-3, 3e-3, 1e-2)
#: last validation accuracy per (method, rate): seed 0, 1, 2 (None: the run diverged)
VALIDATION = {("prenorm", 1e-3): (0.80, 0.81, 0.82),      # mean 81: 2 points below the best, outside the window
              ("prenorm", 3e-3): (0.82, 0.83, 0.84),      # mean 83: the best
              ("prenorm", 1e-2): (0.83, 0.83, None),      # seed 2 diverged: outside, whatever the others score
              ("layerscale", 1e-3): (0.840, 0.845, 0.850),  # 84.5: within 1 point of the best
              ("layerscale", 3e-3): (0.845, 0.850, 0.855),  # 85.0: the best
              ("layerscale", 1e-2): (0.838, 0.842, 0.846)}  # 84.2: within 1 point
#: test accuracy at the chosen rate (3e-3 for both)
TEST = {"prenorm": (0.80, 0.83, 0.84), "layerscale": (0.85, 0.86, 0.87)}  # not one a linear function of the other
STEADY = [2.0, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3]
SPIKE = [2.0, 1.8, 1.7, 1.6, 1.5, 6.0, 1.4]  # 6.0 is a spike: 4.28 from the running mean 1.72 ≥ 2 × 1.72


def _write(run, losses, **kwargs):
    accuracy = VALIDATION[(run.method, run.lr)][run.seed]
    diverged = accuracy is None
    test = TEST[run.method][run.seed] if run.lr == 3e-3 else 0.5
    write_fake_run(run.run_dir, [0.5, 0.5 if diverged else accuracy], [1.0, 0.5], test_accuracy=None if diverged
                   else test, status="diverged" if diverged else "finished", diverged_step=15 if diverged else None)
    lines = [json.dumps({"step": 2 * (i + 1), "split": "train", "loss": loss if math.isfinite(loss) else str(loss)})
             for i, loss in enumerate(losses)]
    with open(run.run_dir / "metrics.jsonl", "a") as f:
        f.write("\n".join(lines) + "\n")


def _study(tmp_path, primary=("layerscale@2",)):
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), TINY_BASE, lrs=RATES, tuning="grid",
                     primary=primary)
    chosen = {("prenorm", 2): 3e-3, ("layerscale", 2): 3e-3}
    rates = {cell: RATES for cell in spec.cells()}
    runs = spec.final_runs(tmp_path, chosen, every_rate=rates)
    for run in runs:
        if (run.method, run.lr, run.seed) == ("layerscale", 1e-3, 0):
            _write(run, SPIKE)  # the planted spike
        elif (run.method, run.lr, run.seed) == ("prenorm", 1e-2, 2):
            _write(run, STEADY[:4] + [math.nan])  # the planted divergence: a non-finite loss, marked diverged
        elif (run.method, run.lr, run.seed) == ("layerscale", 1e-2, 1):
            _write(run, STEADY[:4] + [math.inf, *STEADY[4:]])  # a non-finite loss in a run not marked diverged
        else:
            _write(run, STEADY)
    results = [collect_run(r, ACCURACY) for r in runs]
    cells, _ = assign_families(spec, cell_results(spec, results, chosen, metric=ACCURACY), [])
    return spec, results, cells, rates


def test_runs_record_their_loss_spikes_and_non_finite_losses(tmp_path):
    _, results, _, _ = _study(tmp_path)
    by_id = {r.run_id: r for r in results}
    assert by_id["layerscale-d2-lr0.001-s0"].loss_spikes == 1 and not by_id["layerscale-d2-lr0.001-s0"].nonfinite_loss
    assert by_id["prenorm-d2-lr0.01-s2"].nonfinite_loss and by_id["prenorm-d2-lr0.01-s2"].loss_spikes == 1
    assert by_id["layerscale-d2-lr0.01-s1"].nonfinite_loss and by_id["layerscale-d2-lr0.01-s1"].loss_spikes == 1
    assert by_id["prenorm-d2-lr0.003-s0"].loss_spikes == 0


def test_the_window_is_the_rates_within_the_tolerance_of_the_best_mean(tmp_path):
    spec, results, cells, rates = _study(tmp_path)
    rows = {r["method"]: r for r in stability_rows(spec, results, cells, rates, ACCURACY)}
    # Pre-LN: 1e-3 is 2 points below the best and 1e-2 has a diverged seed: the best rate alone
    assert rows["prenorm"]["window_rates"] == "0.003" and rows["prenorm"]["window_factor"] == 1.0
    assert rows["prenorm"]["window_best"] == 3e-3 and rows["prenorm"]["window_tolerance"] == 1.0
    # LayerScale: every rate within 1 point of 85.0: 1e-2 / 1e-3 = 10
    assert rows["layerscale"]["window_rates"] == "0.001;0.003;0.01"
    assert rows["layerscale"]["window_factor"] == pytest.approx(10.0)
    assert rows["layerscale"]["rates_tried"] == "0.001;0.003;0.01"


def test_divergences_and_spikes_count_every_run_of_the_cell(tmp_path):
    spec, results, cells, rates = _study(tmp_path)
    rows = {r["method"]: r for r in stability_rows(spec, results, cells, rates, ACCURACY)}
    assert (rows["prenorm"]["runs"], rows["prenorm"]["diverged"]) == (9, 1)  # every rate × seed
    assert (rows["prenorm"]["spikes"], rows["prenorm"]["runs_with_spike"]) == (1, 1)  # the NaN is a spike too
    # a non-finite loss counts as a divergence even when the run was not marked diverged
    assert (rows["layerscale"]["runs"], rows["layerscale"]["diverged"]) == (9, 1)
    assert (rows["layerscale"]["spikes"], rows["layerscale"]["runs_with_spike"]) == (2, 2)


def test_the_seed_spread_and_its_ratio_against_the_reference_at_the_chosen_rate(tmp_path):
    spec, results, cells, rates = _study(tmp_path)
    rows = {r["method"]: r for r in stability_rows(spec, results, cells, rates, ACCURACY)}
    layerscale = {0: 85.0, 1: 86.0, 2: 87.0}
    prenorm = {0: 80.0, 1: 83.0, 2: 84.0}
    assert rows["layerscale"]["spread"] == pytest.approx(1.0)
    assert rows["prenorm"]["spread"] == pytest.approx(math.sqrt(13 / 3))  # deviations -7/3, 2/3, 5/3
    low, high = spread_interval(list(layerscale.values()))
    assert (rows["layerscale"]["spread_ci_low"], rows["layerscale"]["spread_ci_high"]) == pytest.approx((low, high))
    ratio = spread_ratio(layerscale, prenorm, draws=BOOTSTRAP_DRAWS, seed=BOOTSTRAP_SEED)
    assert rows["layerscale"]["ratio"] == pytest.approx(1 / math.sqrt(13 / 3)) == pytest.approx(ratio.ratio)
    assert (rows["layerscale"]["ratio_ci_low"], rows["layerscale"]["ratio_ci_high"]) == (ratio.low, ratio.high)
    assert rows["layerscale"]["p_raw"] == pitman_morgan(layerscale, prenorm)
    assert rows["layerscale"]["reference_spread"] == pytest.approx(seed_spread(list(prenorm.values())))
    assert "ratio" not in rows["prenorm"] and "family" not in rows["prenorm"]  # the reference has no comparison


def test_the_stability_family_is_the_primary_cells_by_holm_and_the_rest_bh(tmp_path):
    spec, results, cells, rates = _study(tmp_path)
    (row,) = [r for r in stability_rows(spec, results, cells, rates, ACCURACY) if r["method"] == "layerscale"]
    assert row["family"] == "primary" and row["adjustment"] == "holm" and row["p_adj"] == holm([row["p_raw"]])[0]
    spec, results, cells, rates = _study(tmp_path / "other", primary=())
    # no METHOD@DEPTH entry named: the default family is every method at the deepest depth, so still primary
    (row,) = [r for r in stability_rows(spec, results, cells, rates, ACCURACY) if r["method"] == "layerscale"]
    assert row["family"] == "primary"


def test_an_exploratory_row_is_adjusted_by_benjamini_hochberg(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2, 3), (0, 1, 2), TINY_BASE, lrs=RATES, tuning="grid",
                     primary=("layerscale@3",))
    # stability_rows reads the spec's family only; two depths with planted per-seed values
    from layerscale.stats.intervals import mean_interval
    from layerscale.study.report.results import CellResult

    values = {("prenorm", 2): [80.0, 82.0, 84.0], ("layerscale", 2): [85.0, 85.5, 86.5],
              ("prenorm", 3): [80.0, 81.0, 83.0], ("layerscale", 3): [84.0, 84.3, 84.1]}
    cells = [CellResult("tuned", m, d, 3e-3, 3, 0, mean_interval(v), None, None, 0, None, None, seeds=(0, 1, 2))
             for (m, d), v in values.items()]
    rows = {(r["method"], r["depth"]): r for r in stability_rows(spec, [], cells, {}, ACCURACY)}
    exploratory, primary = rows[("layerscale", 2)], rows[("layerscale", 3)]
    assert exploratory["family"] == "exploratory" and exploratory["adjustment"] == "bh"
    assert exploratory["p_adj"] == benjamini_hochberg([exploratory["p_raw"]])[0]
    assert primary["family"] == "primary"
    assert "window_factor" not in exploratory  # no runs of the grid: no window


def test_a_verdict_needs_the_adjusted_p_and_the_interval_to_agree():
    assert stability_verdict(0.5, 0.3, 0.8, 0.01) == "steadier"
    assert stability_verdict(2.0, 1.3, 3.0, 0.01) == "less steady"
    assert stability_verdict(0.5, 0.3, 1.2, 0.01) == "within noise"  # the interval holds 1
    assert stability_verdict(0.5, 0.3, 0.8, 0.2) == "within noise"  # the adjusted p does not
    assert stability_verdict(None, None, None, None) == ""


def test_the_csv_read_back_prints_the_same_table(tmp_path):
    spec, results, cells, rates = _study(tmp_path)
    rows = stability_rows(spec, results, cells, rates, ACCURACY)
    paths = write_tables(tmp_path, results, cells, ACCURACY, "# x\n", stability=rows)
    assert paths["stability_csv"] == tmp_path / STABILITY_FILE
    back = read_rows(paths["stability_csv"])
    printed = stability_table_lines(rows, "prenorm", 2)
    assert stability_table_lines(back, "prenorm", 2) == printed
    assert "| prenorm at depth 2 | ×1 (0.003; 1 of 3) | 3 | 2.08 [" in printed[2]
    assert "| layerscale at depth 2 | ×10 (0.001–0.01; 3 of 3) | 3 | 1.00 [" in printed[3]
    assert printed[3].endswith(" | 1 / 9 | 2 (2) |") and printed[2].endswith(" | 1 / 9 | 1 (1) |")
    assert any(line.startswith("- Stability family (Holm-adjusted, marked *), 1 comparison: ") for line in printed)
    assert printed[-1] == ("- Divergences: prenorm at depth 2 1 of 9, layerscale at depth 2 1 of 9; loss spikes: "
                           "prenorm at depth 2 1 in 1 run(s), layerscale at depth 2 2 in 2 run(s).")
    section = stability_lines(spec, rows, ACCURACY)
    assert section[0] == "## Stability" and "within 1 point of accuracy of the best" in section[2]
    with open(paths["runs_csv"]) as f:
        header = f.readline().strip().split(",")
    assert header[-2:] == ["loss_spikes", "nonfinite_loss"]


def test_arms_that_move_together_seed_for_seed_are_no_test_and_no_claim():
    """Three seeds with the same tie in both arms (DepthBench's hc and Pre-LN at 16 blocks): every bootstrap draw
    gives the same ratio and Pitman–Morgan's correlation is ±1 by construction — a zero-width interval, as in the
    accuracy tables: no p-value, in no family, "no spread"."""
    from layerscale.stats.intervals import mean_interval
    from layerscale.study.report.results import CellResult

    spec = StudySpec(("prenorm", "hc", "layerscale"), (2,), (0, 1, 2), TINY_BASE, lrs=RATES, tuning="grid")
    values = {"prenorm": [85.63, 85.6, 85.6], "hc": [86.25, 85.89, 85.89], "layerscale": [86.12, 86.49, 86.22]}
    cells = [CellResult("tuned", m, 2, 1e-3, 3, 0, mean_interval(v), None, None, 0, None, None, seeds=(0, 1, 2))
             for m, v in values.items()]
    rows = {r["method"]: r for r in stability_rows(spec, [], cells, {}, ACCURACY)}
    flat = rows["hc"]
    assert flat["ratio"] == pytest.approx(12.0) and flat["ratio_ci_low"] == pytest.approx(flat["ratio_ci_high"])
    assert flat["verdict"] == "no spread" and "p_raw" not in flat and "family" not in flat
    assert rows["layerscale"]["family"] == "primary" and rows["layerscale"]["p_adj"] == rows["layerscale"]["p_raw"]
    lines = stability_table_lines(list(rows.values()), "prenorm", 2)
    assert any(line.startswith("- The bootstrap interval has zero width") and "hc at depth 2 (SD ratio 12.00"
               in line for line in lines)
