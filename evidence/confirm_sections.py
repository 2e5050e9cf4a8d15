"""The confirmatory study's Markdown (docs/results/confirm/DESIGN.md, issue 60), read back from the CSVs that
:func:`evidence.confirm_report.write_report` writes, so that its ``results.md`` and docs/RESULTS.md's ``confirm``
block print the same lines from the same files.

Files in the confirmation root (:data:`FILES`): ``results.csv`` (the primary family, Holm across both studies),
``stability.csv`` (the stability family, Holm within it), ``spikes.csv`` (divergences and loss spikes per cell),
``cpu_runs.csv`` (final runs per cell on each CPU kind) and ``cpu_sensitivity.csv`` (the primary comparisons on the
runs of one CPU kind). Before the report has run (it runs only when every run of both folders has ended), the
sections are one line saying so and the glance line is absent.
"""

from __future__ import annotations

from pathlib import Path

from layerscale.stats.intervals import Interval
from layerscale.study.report.formatting import format_interval, format_p
from layerscale.study.run.csv_rows import read_rows

__all__ = ["FILES", "NOT_REPORTED", "confirm_sections", "primary_glance"]

FILES = {"results": "results.csv", "stability": "stability.csv", "spikes": "spikes.csv", "cpu_runs": "cpu_runs.csv",
         "sensitivity": "cpu_sensitivity.csv"}
NOT_REPORTED = ("Not reported yet: the design reads the confirmation only when all 160 runs of both folders have "
                "ended (docs/results/confirm/DESIGN.md, \"Order of work\"; its dated addenda count the runs ended).")
#: how the two confirmation folders name their depth
_AT = {"fashion": "depth {}", "depthbench": "{} blocks"}


def _float(text: str) -> float | None:
    return None if text == "" else float(text)


def _interval(row: dict) -> Interval | None:
    """The primary row's difference as the study computed it, rebuilt from its CSV fields (for the same printing:
    clipped ends marked, "no spread" where the values were equal)."""
    if row["mean"] == "":
        return None
    return Interval(float(row["mean"]), _float(row["low"]), _float(row["high"]), int(row["n"]), _float(row["std"]),
                    truncated=row["truncated"])


def _label(study: str, comparison: str) -> str:
    """``layerscale@48`` -> ``layerscale at depth 48``; ``hc@4:32`` -> ``hc depth use 4 → 32``."""
    method, _, where = comparison.partition("@")
    shallow, _, deep = where.rpartition(":")
    if shallow:
        return f"{method} depth use {shallow} → {deep}"
    return f"{method} at {_AT.get(study, 'depth {}').format(deep)}"


def _tally(rows: list[dict], column: str, what: str) -> str:
    """One sentence counting the values of ``column`` (``confirmed``: 3, ``weakened``: 1, ...), in first-seen order."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r[column]] = counts.get(r[column], 0) + 1
    return f"Of the {len(rows)} {what}: " + "; ".join(f"{value} {count}" for value, count in counts.items()) + "."


def _primary(rows: list[dict]) -> list[str]:
    lines = ["| study | comparison | redo | difference [95 % CI] | two-level bootstrap 95 % | p | Holm p | verdict | "
             "confirmation |", "|---|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        boot = (f"[{float(r['bootstrap_low']):+.1f}, {float(r['bootstrap_high']):+.1f}]"
                if r["bootstrap_low"] and r["bootstrap_high"] else "—")
        lines.append(f"| {r['study']} | {_label(r['study'], r['comparison'])} | {r['redo_verdict']} | "
                     f"{format_interval(_interval(r), 1, signed=True)} | {boot} | {format_p(_float(r['p_raw']))} | "
                     f"{format_p(_float(r['p_adj']))} | {r['verdict']} | {r['confirmation']} |")
    return lines


def _stability(rows: list[dict]) -> list[str]:
    lines = ["| study | method | depth | seed SD | reference's SD | SD ratio [95 % bootstrap] | Pitman–Morgan p | "
             "Holm p | verdict |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ratio = ("—" if r["ratio"] == "" else
                 f"{float(r['ratio']):.2f} [{float(r['low']):.2f}, {float(r['high']):.2f}]")
        lines.append(f"| {r['study']} | {r['method']} | {r['depth']} | {float(r['spread']):.2f} | "
                     f"{float(r['reference_spread']):.2f} | {ratio} | {format_p(_float(r['p_raw']))} | "
                     f"{format_p(_float(r['p_adj']))} | {r['verdict']} |")
    return lines


def _spikes(rows: list[dict]) -> list[str]:
    lines = ["| study | method | depth | runs | diverged | spikes | runs with a spike |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['study']} | {r['method']} | {r['depth']} | {r['runs']} | {r['diverged']} | {r['spikes']} | "
                     f"{r['runs_with_spike']} |")
    return lines


def _cpu(runs: list[dict], sensitivity: list[dict], min_seeds: int) -> list[str]:
    kinds = sorted({r["cpu"] for r in runs})
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in runs:
        cells.setdefault((r["study"], r["method"], r["depth"]), {})[r["cpu"]] = r["runs"]
    lines = ["Final runs per cell on each CPU kind (each run's `summary.json`, `environment`).", "",
             "| study | method | depth | " + " | ".join(kinds) + " |", "|---|---|---:|" + "---:|" * len(kinds)]
    for (study, method, depth), counts in cells.items():
        lines.append(f"| {study} | {method} | {depth} | " + " | ".join(counts.get(k, "0") for k in kinds) + " |")
    lines += ["", "The primary comparisons repeated on the runs of one CPU kind (both arms of a seed on that kind; "
              f"at least {min_seeds} seeds for every paired difference a comparison needs). Not a family and not "
              "adjusted: the verdicts above are the design's; these say whether they rest on the mixture of CPUs.",
              "", "| study | comparison | CPU kind | seeds | difference [95 % CI] | p | verdict (interval) |",
              "|---|---|---|---:|---:|---:|---|"]
    for r in sensitivity:
        difference = None if r["mean"] == "" else Interval(float(r["mean"]), _float(r["low"]), _float(r["high"]),
                                                           int(r["n"]), None)
        shown = format_interval(difference, 1, signed=True)
        lines.append(f"| {r['study']} | {_label(r['study'], r['comparison'])} | {r['cpu']} | {r['n']} | {shown} | "
                     f"{format_p(_float(r['p_raw']))} | {r['verdict']} |")
    return lines


def confirm_sections(root: str | Path, level: str = "##") -> list[str]:
    """The report's sections (headings at ``level``) as Markdown lines, from the CSVs in ``root``; one line saying
    the report has not run while ``root/results.csv`` is absent."""
    from .confirm_cpu_kinds import MIN_SEEDS

    root = Path(root)
    if not (root / FILES["results"]).is_file():
        return [NOT_REPORTED]
    read = {name: read_rows(root / file) for name, file in FILES.items()}
    return ["Test accuracy in points, seeds 5–14 (none seen before), each method at the rate its redo chose; design "
            "fixed before the runs: docs/results/confirm/DESIGN.md.", "",
            f"{level} Primary family (Holm across both studies)", "",
            "Each redo primary comparison beside its confirmation (the design's rule: a redo verdict `better` or "
            "`worse` is confirmed by the same verdict, weakened by `within noise`, reversed by the opposite one). "
            "The `redo` column is the redo's own verdict (Holm within its study); the depth-use rows are Welch's "
            "interval over the two depths' paired differences.", "",
            *_primary(read["results"]), "", _tally(read["results"], "confirmation", "redo verdicts"), "",
            f"{level} Stability family (Holm within it): seed spread against the reference", "",
            *_stability(read["stability"]), "", _tally(read["stability"], "verdict", "stability comparisons"), "",
            f"{level} Divergences and loss spikes (descriptive)", "",
            "Over every run of a cell; a run diverged when the study marked it so or a training loss was not finite; "
            "a loss spike as Lightning Fabric's `SpikeDetection` defines it with its defaults (DESIGN.md).", "",
            *_spikes(read["spikes"]), "",
            f"{level} CPU kinds (sensitivity check, decided before any result was read)", "",
            *_cpu(read["cpu_runs"], read["sensitivity"], MIN_SEEDS)]


def primary_glance(root: str | Path) -> str | None:
    """One line with the primary family's Holm-adjusted verdicts and confirmations (docs/RESULTS.md's "At a
    glance"); ``None`` until the report has run."""
    rows = read_rows(Path(root) / FILES["results"])
    if not rows:
        return None
    parts = [f"{r['study']} {_label(r['study'], r['comparison'])} {format_interval(_interval(r), 1, signed=True)} "
             f"points: **{r['verdict']}** (Holm-adjusted p {format_p(_float(r['p_adj']))}; redo: {r['redo_verdict']}, "
             f"{r['confirmation']})" for r in rows]
    return ("- Confirmatory study on fresh seeds 5–14 (Fashion-MNIST depth 48 and DepthBench 32 blocks, each method at "
            "its redo's chosen rate), against prenorm, primary family of "
            f"{len(rows)} comparison(s), Holm across both studies: " + "; ".join(parts) + ".")
