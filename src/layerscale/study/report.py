"""The study report: accuracy against depth (one line per method), the results table, and the diagnostics
figures of the deepest runs of the first seed side by side (one colour per method)."""

from __future__ import annotations

import html
from pathlib import Path

from ..atomic_io import atomic_path
from ..diagnostics.plots import new_figure, run_colors
from ..diagnostics.report import ReportSection, write_report
from .grid import RunSpec
from .results import GroupResult, RunResult, group_results, markdown_table

__all__ = ["plot_accuracy_vs_depth", "write_study_report"]


def plot_accuracy_vs_depth(groups: list[GroupResult], metric: str = "final"):
    """Mean evaluation accuracy (%) against depth, one line per method, error bars ± one standard deviation
    over seeds; a cell where every run diverged before its first evaluation is marked ✕ on the x axis."""
    fig, axes = new_figure(7.5, 4.5)
    ax = axes[0, 0]
    methods = list(dict.fromkeys(g.method for g in groups))
    colors = dict(zip(methods, run_colors(len(methods))))
    depths = sorted({g.depth for g in groups})
    for method in methods:
        cells = sorted((g for g in groups if g.method == method), key=lambda g: g.depth)
        points = [(g.depth, getattr(g, f"{metric}_accuracy_mean"), getattr(g, f"{metric}_accuracy_std"))
                  for g in cells if getattr(g, f"{metric}_accuracy_mean") is not None]
        if points:
            xs, ys, es = zip(*points)
            ax.errorbar(xs, [100 * y for y in ys], yerr=[100 * e for e in es], marker="o", capsize=3,
                        color=colors[method], label=method)
        lost = [g.depth for g in cells if g.diverged and getattr(g, f"{metric}_accuracy_mean") is None]
        if lost:
            ax.scatter(lost, [0] * len(lost), marker="x", s=60, color=colors[method], clip_on=False)
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.minorticks_off()
    ax.set_xlabel("depth (transformer blocks)")
    ax.set_ylabel(f"{metric} test accuracy (%)")
    ax.set_title(f"{metric.capitalize()} accuracy against depth (mean ± std over seeds)")
    ax.grid(True, alpha=0.3)
    ax.legend(title="method", fontsize="small")
    return fig


def _table_html(groups: list[GroupResult]) -> str:
    rows = markdown_table(groups).strip().splitlines()
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    body = [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>"


def write_study_report(study_dir: Path, runs: list[RunSpec], results: list[RunResult]) -> Path:
    """Write ``study_dir/report.html`` (and ``accuracy_vs_depth.png`` beside it); returns the HTML path."""
    groups = group_results(results)
    figure = plot_accuracy_vs_depth(groups)
    png = study_dir / "accuracy_vs_depth.png"
    with atomic_path(png) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    deepest = max(r.depth for r in runs)
    first_seed = min(r.seed for r in runs)
    shown = [Path(r.config["run"]["out_dir"]) for r in runs if r.depth == deepest and r.seed == first_seed]
    shown = [d for d in shown if (d / "metrics.jsonl").is_file()]
    sections = [
        ReportSection("Accuracy against depth", figure=figure, name="accuracy_vs_depth",
                      text="Each point is the mean over seeds of the final test accuracy of one method at one "
                           "depth, with ± one standard deviation; every run had the same data, optimiser, "
                           "learning rate and step budget. ✕ on the axis: every run of that cell diverged "
                           "before its first evaluation."),
        ReportSection("Results", html=_table_html(groups),
                      text="Diverged: runs stopped by a non-finite loss or gradient, with the first step at "
                           "which one did. Wall time is training time per run (mean)."),
    ]
    title = f"Depth study: {len(results)} runs, depths {sorted({r.depth for r in runs})}"
    out = study_dir / "report.html"
    if shown:
        write_report(shown, out, extra_sections=sections, title=title)
    else:
        raise FileNotFoundError(f"{study_dir}: no run of depth {deepest} has a metrics.jsonl to report on")
    return out
