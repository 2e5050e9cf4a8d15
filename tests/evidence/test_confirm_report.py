"""The confirmatory study's report on synthetic folders: joint Holm across both studies, the confirmation rule,
the stability family and spike counts as the design fixes them (docs/results/confirm/DESIGN.md)."""

import csv
import json

import pytest

from evidence.confirm_report import confirmation, write_report
from layerscale.stats.intervals import paired_interval, p_value
from layerscale.stats.multiplicity import holm

SEEDS = range(5, 15)
COLUMNS = ["table", "method", "depth_from", "depth", "family", "p_raw", "verdict", "diff_mean", "diff_ci_low",
           "diff_ci_high", "diff_n", "test_per_seed", "bootstrap_low", "bootstrap_high", "diverged"]


def _write_csv(path, rows, columns):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in columns})


def _study(root, name, depth, arms, redo_verdicts, spike_run=None):
    """A finished confirmation folder: ``arms`` method -> per-seed accuracies (the first is the reference)."""
    folder = root / "confirm" / name
    reference, ref_values = next(iter(arms.items()))
    rows, runs = [], []
    for method, values in arms.items():
        row = {"table": "tuned", "method": method, "depth": depth, "diverged": 0,
               "test_per_seed": ";".join(f"{s}:{v}" for s, v in zip(SEEDS, values))}
        if method != reference:
            diff = paired_interval(dict(zip(SEEDS, values)), dict(zip(SEEDS, ref_values)))
            row.update(family="primary", p_raw=p_value(diff), diff_mean=diff.mean, diff_ci_low=diff.low,
                       diff_ci_high=diff.high, diff_n=diff.n, bootstrap_low=diff.low - 0.1,
                       bootstrap_high=diff.high + 0.1)
        rows.append(row)
        for seed in SEEDS:
            run_id = f"{method}-d{depth}-lr0.001-s{seed}"
            runs.append({"run_id": run_id, "method": method, "depth": depth, "status": "finished"})
            losses = [2.0, 1.8, 1.7, 1.6, 1.5] + ([9.0] if (method, seed) == spike_run else []) + [1.4]
            metrics = folder / "runs" / run_id / "metrics.jsonl"
            metrics.parent.mkdir(parents=True, exist_ok=True)
            metrics.write_text("".join(json.dumps({"step": 10 * (i + 1), "split": "train", "loss": v}) + "\n"
                                       for i, v in enumerate(losses)))
    _write_csv(folder / "results.csv", rows, COLUMNS)
    _write_csv(folder / "runs.csv", runs, ["run_id", "method", "depth", "status"])
    (folder / "study.json").write_text(json.dumps({"reference": reference}))
    redo = [{"table": "tuned", "method": m, "depth": depth, "family": "primary", "verdict": v}
            for m, v in redo_verdicts.items()]
    _write_csv(root / f"{name}-grid" / "results.csv", redo, COLUMNS)


@pytest.mark.parametrize("redo, now, expected", [
    ("better", "better", "confirmed"), ("better", "within noise", "weakened"), ("worse", "better", "reversed"),
    ("within noise", "within noise", "confirmed (no effect either time)"),
    ("within noise", "worse", "changed: an effect the redo did not find")])
def test_the_confirmation_rule(redo, now, expected):
    assert confirmation(redo, now) == expected


def test_the_report_adjusts_across_both_studies_and_reads_stability(tmp_path):
    base = [85.0, 85.4, 84.8, 85.2, 85.1, 84.9, 85.3, 85.0, 84.7, 85.2]
    steady = [v + 1.5 + 0.01 * i for i, v in enumerate(base)]          # better, same spread
    noisy = [v + (3.0 if i % 2 else -3.0) for i, v in enumerate(base)]  # within noise, far larger spread
    _study(tmp_path, "fashion", 48, {"prenorm": base, "layerscale": steady, "rezero": noisy},
           {"layerscale": "better", "rezero": "better"}, spike_run=("rezero", 7))
    _study(tmp_path, "depthbench", 32, {"prenorm": base, "hc": [v - 0.02 * i for i, v in enumerate(base)]},
           {"hc": "within noise"})
    paths = write_report(tmp_path / "confirm", tmp_path)
    with paths["results"].open() as f:
        primary = {r["comparison"]: r for r in csv.DictReader(f)}
    raw = [float(primary[k]["p_raw"]) for k in ("layerscale@48", "rezero@48", "hc@32")]
    for key, adjusted in zip(("layerscale@48", "rezero@48", "hc@32"), holm(raw)):
        assert float(primary[key]["p_adj"]) == pytest.approx(adjusted)  # one family across both studies
    assert primary["layerscale@48"]["confirmation"] == "confirmed"
    assert primary["rezero@48"]["verdict"] == "within noise" and primary["rezero@48"]["confirmation"] == "weakened"
    with paths["stability"].open() as f:
        stability = {r["method"]: r for r in csv.DictReader(f)}
    assert stability["rezero"]["verdict"] == "less steady" and float(stability["rezero"]["low"]) > 1
    assert float(stability["layerscale"]["ratio"]) == pytest.approx(1.0, abs=0.1)
    markdown = paths["markdown"].read_text()
    assert "| fashion | rezero | 48 | 10 | 0 | 1 | 1 |" in markdown  # the one planted spike
    assert "| fashion | prenorm | 48 | 10 | 0 | 0 | 0 |" in markdown


def test_the_report_waits_for_every_run(tmp_path):
    base = [85.0 + 0.1 * i for i in range(10)]
    _study(tmp_path, "fashion", 48, {"prenorm": base, "layerscale": [v + 1 for v in base]}, {"layerscale": "better"})
    _study(tmp_path, "depthbench", 32, {"prenorm": base, "hc": [v + 1 for v in base]}, {"hc": "better"})
    runs = tmp_path / "confirm" / "fashion" / "runs.csv"
    runs.write_text(runs.read_text().replace("finished", "pending", 1))
    with pytest.raises(ValueError, match="1 run\\(s\\) have not ended"):
        write_report(tmp_path / "confirm", tmp_path)
    assert not (tmp_path / "confirm" / "results.md").exists()
