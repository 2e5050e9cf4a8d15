"""The confirmatory study's report (docs/results/confirm/DESIGN.md, issue 60): the redos' 13 primary comparisons
re-run on seeds 5–14, Holm across both folders together, each beside its redo's verdict with the confirmation the
design's rule gives; the stability family; divergences and loss spikes. Written before the study's results were
read, as the design requires, and run only when every run of both folders has ended.

Inputs, per confirmed study: the confirmation folder's ``results.csv`` and ``runs.csv`` (written by
``layerscale study --report-only``), its runs (``runs/`` or ``runs.tar.xz``) for the training-loss records, and the
redo's ``results.csv`` for its verdicts. Outputs in the confirmation root: ``results.csv`` (one row per primary
comparison), ``stability.csv`` (one row per stability comparison), ``spikes.csv`` (divergences and loss spikes per
cell), ``cpu_runs.csv`` and ``cpu_sensitivity.csv`` (final runs per CPU kind, and the primary comparisons on the runs
of one kind: :mod:`evidence.confirm_cpu_kinds`), and ``results.md``, printed from those CSVs by
:mod:`evidence.confirm_sections` (as docs/RESULTS.md prints them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from layerscale.atomic_io import write_text_atomic
from layerscale.stats.multiplicity import holm
from layerscale.stats.stability import loss_spikes, seed_spread
from layerscale.study.report.results_table import ResultRow, read_results
from layerscale.study.report.stability_table import ratio_columns, stability_verdict
from layerscale.study.report.verdicts import verdict
from layerscale.study.run.csv_rows import csv_text, read_rows

from .confirm_cpu_kinds import cpu_counts, cpu_kind, read_each_run, sensitivity_rows
from .confirm_sections import FILES, confirm_sections

__all__ = ["CONFIRMED", "SENSITIVITY_FIELDS", "confirmation", "primary_rows", "stability_rows", "spike_counts",
           "write_report"]

#: confirmation folder name -> the redo it confirms (folders under docs/results)
CONFIRMED = {"fashion": "fashion-grid", "depthbench": "depthbench-grid"}
PRIMARY_FIELDS = ["study", "comparison", "reference", "redo_verdict", "n", "mean", "low", "high", "std",
                  "truncated", "bootstrap_low", "bootstrap_high", "p_raw", "p_adj", "verdict", "confirmation"]
SENSITIVITY_FIELDS = ["study", "comparison", "cpu", "n", "mean", "low", "high", "p_raw", "verdict"]
STABILITY_FIELDS = ["study", "method", "depth", "n", "spread", "reference_spread", "ratio", "low", "high", "p_raw",
                    "p_adj", "verdict"]
SPIKE_FIELDS = ["study", "method", "depth", "runs", "diverged", "spikes", "runs_with_spike"]
CPU_RUN_FIELDS = ["study", "method", "depth", "cpu", "runs"]


def confirmation(redo: str, confirm: str) -> str:
    """The design's rule: the redo's verdict beside this study's (``better`` / ``worse`` / ``within noise``)."""
    beyond = ("better", "worse")
    if redo in beyond:
        if confirm == redo:
            return "confirmed"
        return "reversed" if confirm in beyond else "weakened"
    if redo == "within noise":
        return "confirmed (no effect either time)" if confirm == "within noise" else \
            "changed: an effect the redo did not find"
    return f"no rule (redo: {redo or 'none'})"


def _key(row: ResultRow) -> tuple:
    return row.table, row.method, row.depth_from, row.depth


def _all_ended(folder: Path) -> None:
    if not (folder / "runs.csv").is_file():
        raise ValueError(f"{folder}: no runs.csv yet (the study writes it whenever it stops); the design reads the "
                         "confirmation only when every run has ended")
    pending = [r["run_id"] for r in read_rows(folder / "runs.csv") if r["status"] not in ("finished", "diverged")]
    if pending:
        raise ValueError(f"{folder}: {len(pending)} run(s) have not ended ({', '.join(pending[:3])}"
                         f"{' …' if len(pending) > 3 else ''}); the design reads the confirmation only when every "
                         "run has ended")


@dataclass(frozen=True)
class _Primary:
    study: str
    reference: str
    row: ResultRow
    redo_verdict: str


def primary_rows(root: Path, redo_root: Path) -> list[dict]:
    """The 13 primary comparisons with the joint Holm adjustment, verdicts and confirmations."""
    from layerscale.untrusted_files import read_json_file

    found = []
    for name, redo in CONFIRMED.items():
        reference = read_json_file(root / name / "study.json")["reference"]
        redo_rows = {_key(r): r for r in read_results(redo_root / redo / "results.csv") if r.family == "primary"}
        for row in read_results(root / name / "results.csv"):
            if row.family == "primary":
                twin = redo_rows.get(_key(row))
                found.append(_Primary(name, reference, row, twin.verdict if twin else ""))
    adjusted = holm([p.row.p("p_raw") for p in found])
    out = []
    for p, p_adj in zip(found, adjusted):
        diff = p.row.interval("diff")
        called = verdict(diff, True, p_adj)
        out.append({"study": p.study, "comparison": p.row.comparison, "reference": p.reference,
                    "redo_verdict": p.redo_verdict, "n": diff.n if diff else "", "mean": diff.mean if diff else "",
                    "low": diff.low if diff else "", "high": diff.high if diff else "",
                    "std": diff.std if diff else "", "truncated": diff.truncated if diff else "",
                    "bootstrap_low": p.row["bootstrap_low"], "bootstrap_high": p.row["bootstrap_high"],
                    "p_raw": p.row.p("p_raw"), "p_adj": p_adj, "verdict": called,
                    "confirmation": confirmation(p.redo_verdict, called)})
    return out


def stability_rows(root: Path) -> list[dict]:
    """Seed spread against the reference at each folder's deepest depth, Holm within the stability family — by the
    study's own rule for a row (:func:`~layerscale.study.report.stability_table.ratio_columns`): no ratio where
    the reference has no spread, "no spread" and no test where the ratio's interval has zero width; those rows
    stay out of Holm."""
    from layerscale.untrusted_files import read_json_file

    found = []
    for name in CONFIRMED:
        reference_method = read_json_file(root / name / "study.json")["reference"]
        rows = [r for r in read_results(root / name / "results.csv") if r.table == "tuned"]
        deepest = max(r.depth for r in rows)
        reference = next(r for r in rows if r.depth == deepest and r.method == reference_method)
        ref_values = reference.test_by_seed()
        for row in rows:
            if row.depth != deepest or row is reference:
                continue
            values = row.test_by_seed()
            columns = ratio_columns(values, ref_values)
            found.append({"study": name, "method": row.method, "depth": deepest,
                          "n": len(set(values) & set(ref_values)),
                          "spread": seed_spread(list(values.values())),
                          "reference_spread": seed_spread(list(ref_values.values())), "ratio": columns.get("ratio"),
                          "low": columns.get("ratio_ci_low"), "high": columns.get("ratio_ci_high"),
                          "p_raw": columns.get("p_raw"), "verdict": columns.get("verdict", "")})
    tested = [row for row in found if row["p_raw"] is not None]
    for row, p_adj in zip(tested, holm([r["p_raw"] for r in tested])):
        row["p_adj"] = p_adj
        row["verdict"] = stability_verdict(row["ratio"], row["low"], row["high"], p_adj)
    return found


def _train_losses(metrics: Path) -> list[float]:
    """The training-loss series of a run's ``metrics.jsonl`` (the library's reading: a loss that is no number is
    not finite)."""
    from layerscale.study.report.results import train_losses
    from layerscale.train.records.metrics_log import read_metrics

    return train_losses(read_metrics(metrics))


def spike_counts(folder: Path, losses: dict[str, list[float]]) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    """Per cell ``(method, depth)``: ``(runs, diverged runs, spikes in all, runs with a spike)``, from each run's
    training-loss record (``losses``: run id -> the series, :func:`_train_losses`). A run diverged when the study
    marked it so or its training loss was not finite at some record (the design's rule, as the study's own
    stability table counts it)."""
    cells: dict = {}
    for run in read_rows(folder / "runs.csv"):
        key = (run["method"], int(run["depth"]))
        spikes = loss_spikes(losses[run["run_id"]])
        total = cells.get(key, (0, 0, 0, 0))
        series = losses[run["run_id"]]
        diverged = run["status"] == "diverged" or not all(math.isfinite(v) for v in series)  # the design's rule
        cells[key] = (total[0] + 1, total[1] + diverged, total[2] + len(spikes), total[3] + bool(spikes))
    return cells


def _run_records(folder: Path) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Each run's training losses and CPU kind, read in one pass over ``runs/`` (or the archive's copy)."""
    both = read_each_run(folder, lambda run_dir: (_train_losses(run_dir / "metrics.jsonl"), cpu_kind(run_dir)))
    return {k: v[0] for k, v in both.items()}, {k: v[1] for k, v in both.items()}


def write_report(root: Path, redo_root: Path) -> dict[str, Path]:
    """Check that every run has ended, then write the CSVs (:data:`evidence.confirm_sections.FILES`) and
    ``results.md`` in ``root`` (the confirmation folder holding ``fashion/`` and ``depthbench/``)."""
    for name in CONFIRMED:
        _all_ended(root / name)
    primary = primary_rows(root, redo_root)
    stability = stability_rows(root)
    records = {name: _run_records(root / name) for name in CONFIRMED}
    spikes = {(name, m, d): v for name in CONFIRMED
              for (m, d), v in spike_counts(root / name, records[name][0]).items()}
    counts = {(name, m, d): c for name in CONFIRMED for (m, d), c in cpu_counts(root / name, records[name][1]).items()}
    sensitivity = sensitivity_rows(root, tuple(CONFIRMED), {name: records[name][1] for name in CONFIRMED})
    spike_table = [{"study": study, "method": method, "depth": depth, "runs": runs, "diverged": diverged,
                    "spikes": total, "runs_with_spike": with_spike}
                   for (study, method, depth), (runs, diverged, total, with_spike) in sorted(spikes.items())]
    cpu_table = [{"study": study, "method": method, "depth": depth, "cpu": kind, "runs": count}
                 for (study, method, depth), counter in sorted(counts.items())
                 for kind, count in sorted(counter.items())]
    paths = {name: root / file for name, file in FILES.items()} | {"markdown": root / "results.md"}
    write_text_atomic(paths["stability"], csv_text(stability, STABILITY_FIELDS))
    write_text_atomic(paths["spikes"], csv_text(spike_table, SPIKE_FIELDS))
    write_text_atomic(paths["cpu_runs"], csv_text(cpu_table, CPU_RUN_FIELDS))
    write_text_atomic(paths["sensitivity"], csv_text(sensitivity, SENSITIVITY_FIELDS))
    write_text_atomic(paths["results"], csv_text(primary, PRIMARY_FIELDS))  # last: its presence means the report ran
    lines = ["# Confirmatory study on fresh seeds: results", "",
             "<!-- generated by python scripts/confirm_report.py from the two folders' tables and runs; "
             "do not edit -->",
             "", *confirm_sections(root, "##")]
    write_text_atomic(paths["markdown"], "\n".join(lines) + "\n")
    return paths
