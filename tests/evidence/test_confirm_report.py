"""The confirmatory study's report on synthetic folders: joint Holm across both studies, the confirmation rule,
the stability family and spike counts as the design fixes them (docs/results/confirm/DESIGN.md)."""

import csv
import json

import pytest

from evidence.confirm_cpu_kinds import sensitivity_rows
from evidence.confirm_report import confirmation, write_report
from layerscale.stats.intervals import paired_interval, p_value, welch_interval
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


XEON, EPYC = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_capability": "AVX512"}, {"cpu": "AMD EPYC",
                                                                                  "cpu_capability": "AVX2"}


def _study(root, name, depth, arms, redo_verdicts, spike_run=None, cpu=lambda method, seed: XEON):
    """A finished confirmation folder: ``arms`` method -> per-seed accuracies (the first is the reference);
    ``cpu(method, seed)``: the environment each run's summary.json records."""
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
            runs.append({"run_id": run_id, "kind": "final", "method": method, "depth": depth, "lr": 0.001,
                         "seed": seed, "status": "finished"})
            losses = [2.0, 1.8, 1.7, 1.6, 1.5] + ([9.0] if (method, seed) == spike_run else []) + [1.4]
            metrics = folder / "runs" / run_id / "metrics.jsonl"
            metrics.parent.mkdir(parents=True, exist_ok=True)
            metrics.write_text("".join(json.dumps({"step": 10 * (i + 1), "split": "train", "loss": v}) + "\n"
                                       for i, v in enumerate(losses)))
            (metrics.parent / "summary.json").write_text(json.dumps({"environment": cpu(method, seed)}))
    _write_csv(folder / "results.csv", rows, COLUMNS)
    _write_csv(folder / "runs.csv", runs, ["run_id", "kind", "method", "depth", "lr", "seed", "status"])
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


def test_the_cpu_kinds_are_counted_and_each_primary_comparison_repeated_on_one_kind(tmp_path):
    base = [85.0, 85.4, 84.8, 85.2, 85.1, 84.9, 85.3, 85.0, 84.7, 85.2]
    better = [v + 1.0 + 0.05 * (i % 3) for i, v in enumerate(base)]

    def fashion_cpu(method, seed):  # seeds 5-11 on the Xeon; 12-14 on the EPYC, but layerscale's seed 12 not
        return EPYC if seed >= 12 and not (method == "layerscale" and seed == 12) else XEON

    _study(tmp_path, "fashion", 48, {"prenorm": base, "layerscale": better}, {"layerscale": "better"},
           cpu=fashion_cpu)
    _study(tmp_path, "depthbench", 32, {"prenorm": base, "hc": better}, {"hc": "better"},
           cpu=lambda method, seed: XEON if seed < 9 else EPYC)
    paths = write_report(tmp_path / "confirm", tmp_path)
    with paths["sensitivity"].open() as f:
        rows = {(r["study"], r["cpu"]): r for r in csv.DictReader(f)}
    xeon, epyc = "Intel(R) Xeon(R) Processor, AVX512", "AMD EPYC, AVX2"
    seeds = dict(zip(range(5, 15), range(10)))
    on_xeon = paired_interval({s: better[i] for s, i in seeds.items() if s <= 12},
                              {s: base[i] for s, i in seeds.items() if s <= 11})  # seed 12: the arms differ
    row = rows[("fashion", xeon)]
    assert int(row["n"]) == 7 and float(row["mean"]) == pytest.approx(on_xeon.mean)
    assert float(row["low"]) == pytest.approx(on_xeon.low) and row["verdict"] == "better"
    # two seeds with both arms on the EPYC: no interval, said so
    assert rows[("fashion", epyc)]["n"] == "2" and rows[("fashion", epyc)]["mean"] == ""
    assert rows[("fashion", epyc)]["verdict"] == "fewer than 3 seeds"
    assert int(rows[("depthbench", epyc)]["n"]) == 6 and int(rows[("depthbench", xeon)]["n"]) == 4
    markdown = paths["markdown"].read_text()
    assert f"| study | method | depth | {epyc} | {xeon} |" in markdown
    assert "| fashion | layerscale | 48 | 2 | 8 |" in markdown and "| fashion | prenorm | 48 | 3 | 7 |" in markdown
    assert "| fashion | layerscale at depth 48 | AMD EPYC, AVX2 | 2 | — | — | fewer than 3 seeds |" in markdown


def test_an_interaction_on_one_cpu_kind_is_welchs_interval_of_its_paired_differences(tmp_path):
    folder = tmp_path / "depthbench"
    shallow = {"prenorm": [80.0, 80.5, 79.5, 80.2], "hc": [80.1, 80.4, 79.9, 80.0]}
    deep = {"prenorm": [83.0, 83.6, 82.9, 83.1], "hc": [84.5, 84.9, 84.0, 84.8]}
    seeds = (5, 6, 7, 8)
    rows = [{"table": "tuned", "method": m, "depth": d, "test_per_seed": ";".join(f"{s}:{v}" for s, v in
                                                                                   zip(seeds, values[m]))}
            for d, values in ((4, shallow), (32, deep)) for m in ("prenorm", "hc")]
    rows.append({"table": "interaction", "method": "hc", "depth_from": 4, "depth": 32, "family": "primary"})
    _write_csv(folder / "results.csv", rows, COLUMNS)
    runs = [{"run_id": f"{m}-{d}-{s}", "kind": "final", "method": m, "depth": d, "lr": 0.001, "seed": s,
             "status": "finished"} for d in (4, 32) for m in ("prenorm", "hc") for s in seeds]
    _write_csv(folder / "runs.csv", runs, ["run_id", "kind", "method", "depth", "lr", "seed", "status"])
    (folder / "study.json").write_text(json.dumps({"reference": "prenorm"}))
    kinds = {r["run_id"]: "A" for r in runs}
    kinds["hc-4-8"] = "B"  # seed 8 at depth 4 leaves kind A: 3 pairs there, 4 at depth 32
    [row] = [r for r in sensitivity_rows(tmp_path, ("depthbench",), {"depthbench": kinds}) if r["cpu"] == "A"]

    def paired(values, keep):
        return paired_interval({s: v for s, v in zip(seeds, values["hc"]) if s in keep},
                               {s: v for s, v in zip(seeds, values["prenorm"]) if s in keep})

    expected = welch_interval(paired(deep, seeds), paired(shallow, seeds[:3]))
    assert row["comparison"] == "hc@4:32" and row["n"] == 3
    assert row["mean"] == pytest.approx(expected.mean) and row["low"] == pytest.approx(expected.low)
    assert row["verdict"] == ("better" if expected.low > 0 else "within noise")


def test_a_run_without_a_recorded_cpu_is_unrecorded(tmp_path):
    from evidence.confirm_cpu_kinds import UNRECORDED, cpu_kind

    assert cpu_kind(tmp_path) == UNRECORDED  # no summary.json
    (tmp_path / "summary.json").write_text(json.dumps({"environment": {"cpu": "AMD EPYC"}}))
    assert cpu_kind(tmp_path) == UNRECORDED  # no capability
    (tmp_path / "summary.json").write_text(json.dumps({"environment": EPYC}))
    assert cpu_kind(tmp_path) == "AMD EPYC, AVX2"


def test_a_run_with_a_non_finite_loss_counts_as_diverged(tmp_path):
    """The design counts "a run the study marks diverged, or a non-finite training loss"; the report counted only
    the status."""
    from evidence.confirm_report import spike_counts

    folder = tmp_path / "fashion"
    runs = [{"run_id": f"r{i}", "kind": "final", "method": "rezero", "depth": 48, "lr": 0.001, "seed": i,
             "status": "finished"} for i in range(3)]
    _write_csv(folder / "runs.csv", runs, ["run_id", "kind", "method", "depth", "lr", "seed", "status"])
    losses = {"r0": [2.3, 2.1, 1.9], "r1": [2.3, 2.1, float("nan"), 1.9], "r2": [2.3, float("inf")]}
    assert spike_counts(folder, losses)[("rezero", 48)][:2] == (3, 2)


def test_the_stability_family_follows_the_studys_rules_for_rows_without_a_test(tmp_path):
    """A reference without spread gives no ratio; a ratio whose bootstrap interval has zero width is "no spread";
    neither enters Holm (the report called spread_ratio and Pitman-Morgan on them directly)."""
    from evidence.confirm_report import stability_rows

    flat = [85.0] * 10
    base = [85.0, 85.4, 84.8, 85.2, 85.1, 84.9, 85.3, 85.0, 84.7, 85.2]
    _study(tmp_path, "fashion", 48, {"prenorm": flat, "layerscale": base}, {"layerscale": "better"})
    _study(tmp_path, "depthbench", 32, {"prenorm": base, "hc": [2 * v - 80 for v in base],
                                        "mhc": [v + 3.0 * (i % 2) for i, v in enumerate(base)]},
           {"hc": "better", "mhc": "better"})
    rows = {(r["study"], r["method"]): r for r in stability_rows(tmp_path / "confirm")}
    no_reference = rows[("fashion", "layerscale")]
    assert no_reference["ratio"] is None and no_reference["p_raw"] is None and "p_adj" not in no_reference
    linear = rows[("depthbench", "hc")]  # twice the reference's deviations, seed for seed: every draw gives 2
    assert linear["verdict"] == "no spread" and linear["p_raw"] is None and "p_adj" not in linear
    tested = rows[("depthbench", "mhc")]
    assert tested["p_adj"] == pytest.approx(tested["p_raw"])  # alone in its Holm family


def test_results_md_and_the_page_print_the_same_sections_from_the_reports_csvs(tmp_path):
    """docs/RESULTS.md's ``confirm`` block says the report has not run until it has, then prints the sections
    results.md prints (one level deeper), read back from the CSVs; the glance line quotes the primary rows."""
    from evidence.confirm_sections import NOT_REPORTED, confirm_sections, primary_glance
    from evidence.results_page import render_block

    base = [85.0, 85.4, 84.8, 85.2, 85.1, 84.9, 85.3, 85.0, 84.7, 85.2]
    steady = [v + 1.5 + 0.01 * i for i, v in enumerate(base)]
    _study(tmp_path, "fashion", 48, {"prenorm": base, "layerscale": steady}, {"layerscale": "better"})
    _study(tmp_path, "depthbench", 32, {"prenorm": base, "hc": [v - 0.02 * i for i, v in enumerate(base)]},
           {"hc": "within noise"})
    root = tmp_path / "confirm"
    assert render_block("confirm", {}, tmp_path) == NOT_REPORTED + "\n" and primary_glance(root) is None
    paths = write_report(root, tmp_path)
    sections = confirm_sections(root, "###")
    assert render_block("confirm", {}, tmp_path) == "\n".join(sections) + "\n"
    markdown = paths["markdown"].read_text()
    assert markdown.endswith("\n".join(confirm_sections(root, "##")) + "\n")
    assert "### Primary family (Holm across both studies)" in sections and "## Primary family" not in sections
    diff = paired_interval(dict(zip(SEEDS, steady)), dict(zip(SEEDS, base)))
    shown = f"{diff.mean:+.1f} [{diff.low:.1f}, {diff.high:.1f}]"
    assert f"| fashion | layerscale at depth 48 | better | {shown} |" in markdown
    tally = [line for line in sections if line.startswith("Of the 2 redo verdicts")]  # hc drifts by seed: an effect
    assert tally == ["Of the 2 redo verdicts: confirmed 1; changed: an effect the redo did not find 1."]
    glance = primary_glance(root)
    assert glance.startswith("- Confirmatory study") and "against prenorm, primary family of 2 comparison(s)" in glance
    assert f"fashion layerscale at depth 48 {shown} points: **better**" in glance
    assert "redo: better, confirmed" in glance and "depthbench hc at 32 blocks" in glance
