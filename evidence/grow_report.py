"""results.md and results.csv of the grow evidence (docs/results/grow/DESIGN.md), and its block and "At a glance"
line on docs/RESULTS.md, generated from ``sources.csv``, ``runs.csv`` and ``effective_depth.csv`` alone
(statistics: :mod:`evidence.grow_analysis`)."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from layerscale.atomic_io import write_text_atomic
from layerscale.study.run.csv_rows import csv_text, read_rows
from layerscale.study.report.formatting import TRUNCATION_NOTE, format_interval, format_p
from .grow_analysis import (ARM_NAMES, ARMS, ENDED, RESULT_FIELDS, GrowAnalysis, metric_of, result_rows,
                            typed_runs, validation_score)
from layerscale.stats.intervals import mean_interval, within_range
from layerscale.study.run.tuning import mean_score

__all__ = ["load_analysis", "grow_sections", "primary_glance", "write_report"]


def load_analysis(out: str | Path) -> GrowAnalysis:
    """The analysis of the committed CSVs in ``out`` (missing files read as empty)."""
    out = Path(out)
    return GrowAnalysis(read_rows(out / "sources.csv"), typed_runs(read_rows(out / "runs.csv")),
                        read_rows(out / "effective_depth.csv"))


def _f(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _join(values, digits: int) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def status_line(analysis: GrowAnalysis) -> str:
    """How far the runs are: sources, ended runs, diverged runs."""
    runs = analysis.runs
    return (f"{len(analysis.sources)} sources; {sum(r['status'] in ENDED for r in runs)} of {len(runs)} runs of the "
            f"arms ended ({sum(r['status'] == 'diverged' for r in runs)} diverged). The extra budget E of every "
            "arm is the source's step count; test metrics are reported only at each arm's chosen rate.")


def _table_start(level: str, title: str, intro: str, columns: list[str]) -> list[str]:
    """A section's heading, its paragraph and the head of its table."""
    return [f"{level} {title}", "", intro, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _or_none_yet(lines: list[str], why: str) -> list[str]:
    """A section's lines, its table head replaced by ``why`` when the table has no row yet."""
    if lines[-1].startswith("|---"):
        return lines[:-2] + [f"None yet: {why}.", ""]
    return lines + [""]


def _sources_section(analysis: GrowAnalysis, level: str) -> list[str]:
    lines = _table_start(
        level, "The sources",
        "Each source is the committed run retrained from its recorded config (a new draw of the same recipe, "
        "DESIGN.md's addendum) and grown with `layerscale grow --insert L --where every:1 --init copy "
        "--gamma 0`. Test metric of the committed run (runs.csv of its study) and of the retrain; the "
        "retrain's and the grown model's mean loss (nats) and accuracy on the whole test split before any "
        "training, which must agree: the same accuracy and the loss within 1e-6 of itself (the blocks see "
        "bitwise the same inputs; the CPU's kernels may round a last bit differently, "
        "scripts/grow_evidence.py `IDENTITY_RTOL`).",
        ["source", "run", "steps", "training seconds", "committed test", "retrained test",
         "test loss: source / grown (difference)", "test accuracy: source / grown", "identical"])
    for s in analysis.sources:
        digits = metric_of(s["classification"] == "True").digits + 1
        number = (lambda name: None if s[name] == "" else float(s[name]))
        lines.append(f"| {s['source']} (depth {s['depth']} → {2 * int(s['depth'])}) | {s['study']} "
                     f"`{s['run_id']}` | {s['steps']} | {_f(number('train_s'), 0)} | "
                     f"{_f(number('committed_test'), digits)} | {_f(number('retrained_test'), digits)} | "
                     f"{float(s['source_loss']):.6f} / {float(s['grown_loss']):.6f} "
                     f"({float(s['loss_difference']):+.1e}) | "
                     f"{float(s['source_accuracy']):.6f} / {float(s['grown_accuracy']):.6f} | {s['identical']} |")
    return lines + [""]


def _rates_section(analysis: GrowAnalysis, level: str) -> list[str]:
    lines = _table_start(
        level, "Rate choice",
        "Mean validation score at the end of each rate's seeds (accuracy % / bits per byte); the chosen "
        "rate is the best mean, or among the rates within one standard error of it (paired by seed) the "
        "one nearest 1e-3 (`layerscale.study.run.tuning.choose_rate`). A diverged run scores worst. \"(grid "
        "edge)\" marks a chosen rate that is the grid's smallest or largest: a better rate may lie beyond it "
        "(the grid is the design's, fixed before the runs, and is not extended).",
        ["source", "arm", "validation per rate", "chosen", "tied"])
    for s in analysis.sources:
        key, metric = s["source"], analysis.metric[s["source"]]
        for arm in ARMS:
            rows = [r for r in analysis.runs if r["source"] == key and r["arm"] == arm]
            if not rows:
                continue
            parts, grid = [], sorted({r["lr"] for r in rows})
            for lr in grid:
                scores = [validation_score(r, metric) for r in sorted(rows, key=lambda r: r["seed"]) if r["lr"] == lr]
                ended = all(r["status"] in ENDED for r in rows if r["lr"] == lr)
                mean = mean_score(scores)
                text = ("pending" if not ended else "diverged" if mean == -math.inf
                        else f"{(mean if metric.higher_is_better else -mean):.{metric.digits + 1}f}")
                parts.append(f"{lr:g}: {text}")
            choice = analysis.choice.get((key, arm))
            tied = "—" if choice is None or not choice.is_tie else ", ".join(f"{lr:g}" for lr in choice.tied)
            chosen = "—" if choice is None else f"{choice.lr:g}" + (
                " (grid edge)" if choice.lr in (grid[0], grid[-1]) else "")
            lines.append(f"| {key} | {ARM_NAMES[arm]} | {'; '.join(parts)} | {chosen} | {tied} |")
    return lines + [""]


def _results_section(analysis: GrowAnalysis, level: str) -> list[str]:
    lines = _table_start(
        level, "Test metric at the chosen rate",
        "Per source and arm at its chosen rate: the test metric, mean over seeds 0–2 with its 95 % "
        "t-interval (accuracy truncated to [0, 100]), each seed's value, and each run's training seconds and "
        "steps (equal steps, not equal FLOPs: a step of a grown model costs about twice one of the "
        "source).",
        ["source", "arm", "rate", "test", "per seed", "training seconds per seed", "steps"])
    for s in analysis.sources:
        key, metric = s["source"], analysis.metric[s["source"]]
        for arm in ARMS:
            cell = analysis.cells.get((key, arm))
            if cell is None:
                continue
            lines.append(f"| {key} ({metric.name}) | {ARM_NAMES[arm]} | {analysis.choice[(key, arm)].lr:g} | "
                         f"{format_interval(cell.interval, metric.digits)} | "
                         f"{_join([cell.values[x] for x in sorted(cell.values)], metric.digits + 1)} | "
                         f"{', '.join(_f(r['train_s'], 0) for r in cell.runs)} | "
                         f"{', '.join('—' if r['steps'] is None else str(r['steps']) for r in cell.runs)} |")
    return _or_none_yet(lines, "no arm has all its runs ended yet, so no rate is chosen and no test metric shown")


def _family(row: dict) -> str:
    return "primary (Holm)" if row["family"] == "primary" else "exploratory (BH)"


def _comparison_section(analysis: GrowAnalysis, level: str) -> list[str]:
    lines = _table_start(
        level, "Comparisons",
        "Primary family (fixed in DESIGN.md, Holm over its 4 comparisons): (b) − (a) and (c) − (a) per "
        "source, paired by seed. Exploratory (Benjamini–Hochberg over the rest): (d) against (a), (b), (c) "
        "by Welch's interval, (b) − (c) paired. Differences in points of accuracy / bits per byte (lower is "
        "better); the verdict, by the adjusted p-value, says whether the first arm is better or worse than "
        "the second, and a comparison not significant after adjustment is within noise.",
        ["family", "source", "comparison", "test", "difference (95 % interval)", "per seed", "p",
         "p adjusted", "verdict"])
    for row in sorted(analysis.comparisons, key=lambda r: r["family"] != "primary"):
        diff, digits = row["diff"], row["metric"].digits + 1
        seeds = "—" if diff is None or not diff.values or row["how"] != "paired" else _join(diff.values, digits)
        lines.append(f"| {_family(row)} | {row['source']} | ({row['first']}) − ({row['second']}) | {row['how']} | "
                     f"{format_interval(diff, digits, True)} | {seeds} | {format_p(row['p_raw'])} | "
                     f"{format_p(row.get('p_adj'))} | {row['verdict']} |")
    return _or_none_yet(lines, "no comparison has both its arms' rates chosen yet")


def _depth_section(analysis: GrowAnalysis, level: str) -> list[str]:
    lines = _table_start(
        level, "Effective depth",
        "`D_δ` (docs/analysis.md; `layerscale.analysis.analyze_run` with its defaults, δ = 0.01 nats, on at "
        "most 2,000 test examples) of the source and of every final model at its arm's chosen rate: per "
        "model `D_δ` with its bootstrap interval, per arm the mean over seeds with its 95 % t-interval "
        "(truncated to [0, depth]).",
        ["source", "model", "depth", "mean over seeds", "per seed: D_δ (bootstrap interval)"])
    by_key = defaultdict(list)
    for d in analysis.depths:
        by_key[(d["source"], d["arm"])].append(d)
    for s in analysis.sources:
        for arm in ("source",) + ARMS:
            rows = sorted(by_key.get((s["source"], arm), []), key=lambda d: -1 if d["seed"] == "" else int(d["seed"]))
            if not rows:
                continue
            depth = int(rows[0]["depth"])
            values = [float(d["effective_depth"]) for d in rows]
            cell = within_range(mean_interval(values), 0.0, depth) if len(values) > 1 else None
            per = "; ".join(f"{int(float(d['effective_depth']))} ({float(d['low']):g}–{float(d['high']):g})"
                            for d in rows)
            name = "source" if arm == "source" else f"{ARM_NAMES[arm]} at {float(rows[0]['lr']):g}"
            lines.append(f"| {s['source']} | {name} | {depth} | {format_interval(cell, 1) if cell else '—'} | "
                         f"{per} |")
    return _or_none_yet(lines, "the effective depths are measured after the training runs have ended (the runner's last step)")


def grow_sections(out: str | Path, level: str = "##") -> list[str]:
    """The report's status line and sections (headings at ``level``) as Markdown lines."""
    return _sections(load_analysis(out), level)


def _sections(analysis: GrowAnalysis, level: str) -> list[str]:
    lines = [status_line(analysis), ""]
    for section in (_sources_section, _rates_section, _results_section, _comparison_section, _depth_section):
        lines += section(analysis, level)
    return lines + [TRUNCATION_NOTE, ""]


def primary_glance(out: str | Path) -> str | None:
    """One line with the primary family's Holm-adjusted verdicts (docs/RESULTS.md's "At a glance"); ``None``
    until every primary comparison has its runs."""
    analysis = load_analysis(out)
    primary = [r for r in analysis.comparisons if r["family"] == "primary"]
    if not analysis.sources or len(primary) < analysis.primary_count:
        return None
    parts = [f"{r['source']} ({r['first']}) − ({r['second']}) "
             f"{format_interval(r['diff'], r['metric'].digits + 1, True)} {r['metric'].difference_unit}: "
             f"**{r['verdict']}** (Holm-adjusted p {format_p(r.get('p_adj'))})" for r in primary]
    return ("- Growing a trained model deeper, grown (b: train all; c: new blocks only) against continuing the "
            f"source (a) with equal extra steps, primary family of {len(primary)} comparison(s): "
            + "; ".join(parts) + ".")


def write_report(out: str | Path) -> None:
    """``out/results.csv`` and ``out/results.md`` from the CSVs in ``out`` (each a temporary file, then renamed)."""
    out = Path(out)
    lines = ["# Growing a trained model deeper", "",
             "<!-- generated by scripts/grow_evidence.py from sources.csv, runs.csv and effective_depth.csv; "
             "do not edit -->", ""]
    analysis = load_analysis(out)
    sections = _sections(analysis, "##")
    lines += [f"Design: DESIGN.md (fixed before the runs). {sections[0]}"] + sections[1:]
    write_text_atomic(out / "results.csv", csv_text(result_rows(analysis), RESULT_FIELDS))
    write_text_atomic(out / "results.md", "\n".join(lines))
