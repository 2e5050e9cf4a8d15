"""The depth-use evidence's tables (evidence.depth_use_report) from hand-made CSVs: the removable-block
count, the Welch difference and its Holm / BH adjustment, and a report that rebuilds byte-identically."""

from __future__ import annotations

import csv
import math

import pytest

from evidence import depth_use_report as report
from layerscale.study.run.csv_rows import read_rows
from layerscale.stats.intervals import mean_interval, p_value, welch_interval


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


EFFECTIVE = {"prenorm": [12, 11, 11], "layerscale": [12, 12, 12]}
#: Δloss after removing n blocks by ablation, unhealed (n = 1, 2, 3) and healed (n = 1, 2), per seed
CURVES = {"prenorm": [([0.01, 0.04, 0.30], [0.02, 0.20]), ([0.03, 0.06, 0.40], [0.01, 0.03]),
                      ([0.02, 0.05, 0.10], [0.06, 0.30])],
          "layerscale": [([0.00, 0.01, 0.02], [0.01, 0.02]), ([0.01, 0.02, 0.30], [0.02, 0.04]),
                         ([0.02, 0.03, 0.04], [0.03, 0.05])]}
CLEAN = 0.4


@pytest.fixture()
def out(tmp_path):
    models, depths, pruning = [], [], []
    for method in ("prenorm", "layerscale"):
        for seed in range(3):
            run_id = f"{method}-d12-lr0.001-s{seed}"
            models.append({"run_id": run_id, "method": method, "lr": 0.001, "seed": seed, "committed_test": 86.0,
                           "retrained_test": 86.1, "train_s": 200.0})
            d = EFFECTIVE[method][seed]
            depths.append({"run_id": run_id, "method": method, "seed": seed, "delta": 0.05, "spans": "angular",
                           "effective_depth": d, "low": d - 1, "high": d, "removed_span": "null", "loss": CLEAN,
                           "accuracy": 0.86, "probe_saturation_depth": 11, "cpu_s": 1.0})
            unhealed, healed = CURVES[method][seed]
            base = {"run_id": run_id, "method": method, "seed": seed, "blocks": "", "accuracy": 0.8, "cpu_s": 1.0}
            pruning.append({**base, "criterion": "none", "removed": 0, "healed": True, "loss": CLEAN + 0.01})
            pruning.append({**base, "criterion": "ablation", "removed": 0, "healed": False, "loss": CLEAN})
            for n, delta in enumerate(unhealed, start=1):
                pruning.append({**base, "criterion": "ablation", "removed": n, "healed": False, "loss": CLEAN + delta})
            for n, delta in enumerate(healed, start=1):
                pruning.append({**base, "criterion": "ablation", "removed": n, "healed": True, "loss": CLEAN + delta})
    _write(tmp_path / "models.csv", models)
    _write(tmp_path / "effective_depth.csv", depths)
    _write(tmp_path / "pruning.csv", pruning)
    return tmp_path


def test_removable_is_the_largest_n_within_delta_of_the_unpruned_unhealed_loss(out):
    rows = read_rows(out / "pruning.csv")
    first_prenorm = [r for r in rows if r["run_id"] == "prenorm-d12-lr0.001-s0"]
    assert report._removable(first_prenorm, 0.05, healed=False) == 2          # 0.01, 0.04 within; 0.30 not
    assert report._removable(first_prenorm, 0.05, healed=True) == 1           # 0.02 within; 0.20 not
    second_layerscale = [r for r in rows if r["run_id"] == "layerscale-d12-lr0.001-s1"]
    assert report._removable(second_layerscale, 0.05, healed=False) == 2      # n = 3 costs 0.30
    assert report._removable(second_layerscale, 0.015, healed=False) == 1    # n = 2 costs 0.02


def test_primary_differences_are_welch_and_holm_adjusted(out):
    comparisons = report._Comparisons()
    report._depth_section(read_rows(out / "effective_depth.csv"), comparisons)
    report._pruning_rows(read_rows(out / "pruning.csv"), comparisons)
    comparisons.adjust()
    primary = [r for r in comparisons.rows if r["primary"]]
    assert [(r["what"], r["variant"]) for r in primary] == [("effective depth", "angular"),
                                                             ("removable", "ablation healed")]
    depth = primary[0]["diff"]
    assert depth.mean == pytest.approx(12 - 34 / 3)
    assert depth.low == pytest.approx(welch_interval(mean_interval([12, 12, 12]), mean_interval([12, 11, 11])).low)
    # healed ablation counts within 0.05: prenorm 1, 2, 0 and layerscale 2, 2, 2
    removable = primary[1]["diff"]
    assert removable.mean == pytest.approx(2 - 1)
    p = [r["p_raw"] for r in primary]
    present = sorted(x for x in p if x is not None)
    if len(present) == 2:  # Holm over two: the smaller doubled, the larger at least that
        assert min(r["p_adj"] for r in primary) == pytest.approx(min(1.0, 2 * present[0]))
    assert p[1] == pytest.approx(p_value(removable))
    exploratory = [r for r in comparisons.rows if not r["primary"]]
    assert exploratory and all("p_adj" in r for r in exploratory)


def test_report_rebuilds_byte_identically_and_prints_the_intervals(out):
    report.write_report(out)
    first = (out / "results.md").read_bytes()
    report.write_report(out)
    assert (out / "results.md").read_bytes() == first
    text = first.decode()
    assert "6 of 24 models finished." in text
    cell = mean_interval([12, 11, 11])
    assert cell.high > 12 and f"{cell.mean:.1f} [{cell.low:.1f}, 12.0†]" in text  # truncated to [0, 12]
    assert "| ablation | 169 steps |" in text and "primary (Holm)" in text
    assert not math.isnan(cell.low)


def test_the_glance_line_states_both_primary_verdicts_and_nothing_before_them(out, tmp_path_factory):
    line = report.primary_glance(out)
    assert line.startswith("- Depth use and pruning") and line.count("Holm-adjusted p") == 2
    diff = welch_interval(mean_interval([12, 12, 12]), mean_interval([12, 11, 11]))
    assert f"{diff.mean:+.2f} [{diff.low:.2f}, {diff.high:.2f}] blocks" in line
    assert report.primary_glance(tmp_path_factory.mktemp("empty")) is None
