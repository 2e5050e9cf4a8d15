"""``write_report``: one self-contained HTML file (figures embedded as base64 PNG) for one or several runs.

Layout: a table of the runs (model, method, depth, steps, status, final and best evaluation), notes about partial
runs, any ``lead_sections`` a caller puts first (a study's accuracy against depth), then one section per figure —
training curves, the |γ| heatmaps (and, for a grown model, its new blocks' γ), branch-to-stream ratio against
depth, stream RMS / gradient norm / update ratio against depth — then the diagnostics warnings, then any
``extra_sections``. Every PNG is also written beside the HTML, in ``<stem>_figures/``. Every file is written to a
temporary name in its folder and renamed into place.
"""

from __future__ import annotations

import base64
import html
import numbers
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..atomic_io import write_bytes_atomic
from ..destinations import check_writable_dir
from ..messages import shown_value
from ..paths import describe_non_file, refuse_non_file
from . import plots
from .grown_plots import figure_new_block_scales
from .html_parts import REPORT_CSS, figure_png_bytes
from .run_data import RunData, read_run
from .run_dirs import distinct_run_names, expand_run_dirs

__all__ = ["ReportSection", "Report", "standard_sections", "write_html_document", "write_report"]

_MAX_WARNINGS_SHOWN = 50
#: dots per inch a figure may be rendered at (at 1000 dpi the largest figure is already hundreds of MB of pixels)
MAX_DPI = 1000


@dataclass
class ReportSection:
    """One section of the report: a title, an optional matplotlib figure (saved as ``<name>.png``), an
    explanatory paragraph (plain text) and optional trusted HTML (e.g. a table) shown under it."""

    title: str
    figure: Any = None
    text: str = ""
    html: str = ""
    name: str | None = None

    @property
    def file_stem(self) -> str:
        return self.name or (re.sub(r"[^a-z0-9]+", "_", self.title.lower()).strip("_") or "figure")


@dataclass
class Report:
    """What :func:`write_report` wrote: the HTML file and each figure's PNG (by section file stem)."""

    html_path: Path
    figure_paths: dict[str, Path] = field(default_factory=dict)
    runs: list[RunData] = field(default_factory=list)


def standard_sections(runs: Sequence[RunData]) -> list[ReportSection]:
    """The report's figures for ``runs``, each with a paragraph on how to read it."""
    runs = list(runs)
    return [
        ReportSection(
            "Training curves", plots.figure_curves(runs),
            "Loss and accuracy against the optimizer step: training records (averaged over the logging window) "
            "as solid lines, evaluation on the held-out split as dashed lines with markers. One colour per run.",
            name="curves"),
        ReportSection(
            "LayerScale |γ| per block", plots.figure_scale_heatmaps(runs),
            "Mean |γ| of each block's scale (rows, block 1 = nearest the input) at each recorded step (columns), "
            "on one logarithmic colour scale for all panels. LayerScale starts every block at ε and lets "
            "training grow the blocks it needs: bright rows are blocks the network has switched on, dark rows "
            "blocks that stay near the identity. Branches without a learnable scale are marked as such; in a "
            f"grown model, {plots.NEW_BLOCK_MARK} marks the blocks layerscale grow inserted.",
            name="scale_heatmap"),
        *_grown_sections(runs),
        ReportSection(
            "Branch-to-stream ratio against depth", plots.figure_ratio_vs_depth(runs),
            "‖γ ⊙ F(x)‖ / ‖x‖ for every block: how large each branch's update is relative to the residual "
            "stream it is added to, at the start (dotted), middle (dashed) and end (solid) of training. "
            "A ratio far above 1 means the branch overwrites the stream (the instability LayerScale prevents); "
            "a flat profile across depth means every block contributes alike.",
            name="ratio_vs_depth"),
        ReportSection(
            "Signal and gradients through depth", plots.figure_signal_vs_depth(runs),
            "Left: RMS of the residual stream after each block (the forward signal; Pre-LN streams grow with "
            "depth). Middle: the norm of each block's gradient (the backward signal; vanishing towards the input "
            "or exploding are both visible here). Right: the relative size of each optimizer update ‖ΔW‖/‖W‖.",
            name="signal_vs_depth"),
    ]


def _grown_sections(runs: Sequence[RunData]) -> list[ReportSection]:
    """The new blocks' γ, for runs of a grown model (none otherwise)."""
    figure = figure_new_block_scales(runs)
    if figure is None:
        return []
    return [ReportSection(
        "New blocks of a grown model", figure,
        "Mean |γ| of the blocks layerscale grow inserted (red: their mean, shaded: lowest to highest block) and of "
        "the source blocks (grey, dashed), at each recorded step. The new blocks start at γ = G (0 by default: the "
        "grown model starts as exactly its source's function); how far they rise is how much training switches "
        "them on. The new blocks are those of the folder the run started from (run.init_from).",
        name="new_block_scales")]


def _fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return "–" if value is None else str(value)


def _runs_table(runs: Sequence[RunData]) -> str:
    head = ("run", "model", "method", "depth", "last step", "status", "final eval loss", "final eval accuracy",
            "best eval accuracy", "warnings")
    rows = []
    for run in runs:
        final = run.eval[-1] if run.eval else {}
        accuracies = [r["accuracy"] for r in run.eval if isinstance(r.get("accuracy"), (int, float))]
        cells = (run.name, run.model.get("name", "?"), run.method, run.depth, run.last_step,
                 "complete" if run.complete else "in progress / stopped", _fmt(final.get("loss")),
                 _fmt(final.get("accuracy")), _fmt(max(accuracies) if accuracies else None), len(run.warnings))
        rows.append("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _notes(runs: Sequence[RunData]) -> str:
    items = [f"<li><b>{html.escape(run.name)}</b>: {html.escape(note)}</li>" for run in runs for note in run.notes]
    return f'<ul class="notes">{"".join(items)}</ul>' if items else ""


def _warnings_table(runs: Sequence[RunData]) -> str:
    rows = [(run.name, w) for run in runs for w in run.warnings]
    if not rows:
        return "<p>No diagnostics warnings were raised.</p>"
    shown = rows[:_MAX_WARNINGS_SHOWN]
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in
                         (name, w.get("step"), w.get("block"), w.get("branch"), w.get("kind"), w.get("value"),
                          w.get("threshold"), w.get("message"))) + "</tr>"
        for name, w in shown)
    more = f"<p>… and {len(rows) - len(shown)} more (see metrics.jsonl).</p>" if len(rows) > len(shown) else ""
    head = "".join(f"<th>{h}</th>" for h in ("run", "step", "block", "branch", "kind", "value", "threshold",
                                                     "message"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def write_report(run_dirs: Sequence[str | os.PathLike | RunData] | str | os.PathLike | RunData,
                 out_path: str | os.PathLike = "report.html", extra_sections: Sequence[ReportSection] = (),
                 title: str | None = None, dpi: int = 100,
                 lead_sections: Sequence[ReportSection] = ()) -> Report:
    """Write the HTML report of ``run_dirs`` (run directories, or :class:`RunData` built by the caller) to
    ``out_path``: ``lead_sections`` right after the runs table (a study's headline figure), then the standard
    figures and the warnings, then ``extra_sections``. PNGs also go to ``<out stem>_figures/`` beside it. A folder
    of run directories (Lightning's ``lightning_logs/``) stands for the runs in it; runs whose folders share a name
    are told apart by their parent folders (:mod:`layerscale.diagnostics.run_dirs`).

    Raises ``FileNotFoundError`` naming a missing run directory or file (``config.yaml``, ``metrics.jsonl``),
    ``ValueError`` when no run is given or two runs share a name, ``ImportError`` without matplotlib; a one-line
    ``ValueError`` for a bad ``out_path`` (a folder, a FIFO, no ``.html``), ``dpi``, ``title`` or section, before
    any run is read or anything is drawn or written.
    """
    if isinstance(run_dirs, (str, os.PathLike, RunData)):
        run_dirs = [run_dirs]
    if not run_dirs:
        raise ValueError("write_report needs at least one run directory")
    if title is not None and not isinstance(title, str):
        raise ValueError(f"title must be a string (or None), got {type(title).__name__} {shown_value(title)}")
    lead_sections = _checked_sections("lead_sections", lead_sections)
    extra_sections = _checked_sections("extra_sections", extra_sections)
    check_document_target(out_path, dpi)  # before any run is read or figure drawn
    plots.require_matplotlib()
    folders = expand_run_dirs([item for item in run_dirs if not isinstance(item, RunData)])
    runs = [item for item in run_dirs if isinstance(item, RunData)]  # built by the caller: named by it
    runs += [read_run(path, name) for path, name in zip(folders, distinct_run_names(folders))]
    names = [run.name for run in runs]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise ValueError(f"two runs are both named {duplicate!r}; the legend could not tell them apart (rename "
                         f"one directory)")
    sections = [*lead_sections, *standard_sections(runs),
                ReportSection("Diagnostics warnings", html=_warnings_table(runs)), *extra_sections]
    title = title or ("Run report: " + ", ".join(names) if len(runs) <= 3 else f"Report of {len(runs)} runs")
    report = write_html_document(out_path, sections, title, dpi=dpi,
                                 intro_html=f"<h2>Runs</h2>\n{_runs_table(runs)}\n{_notes(runs)}")
    report.runs = runs
    return report


def _checked_sections(name: str, sections: object) -> list[ReportSection]:
    """``sections`` as a list; a one-line ``ValueError`` naming ``name`` unless it is an iterable (not a string) of
    :class:`ReportSection`."""
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Iterable):
        raise ValueError(f"{name} must be a list of ReportSection, got {type(sections).__name__} "
                         f"{shown_value(sections)}")
    sections = list(sections)
    for index, section in enumerate(sections):
        if not isinstance(section, ReportSection):
            raise ValueError(f"{name}[{index}] must be a ReportSection, got {type(section).__name__} "
                             f"{shown_value(section)}")
    return sections


def check_document_target(out_path: str | os.PathLike, dpi: int) -> tuple[Path, Path]:
    """``(out, figures folder)`` for a report at ``out_path`` drawn at ``dpi``, or a one-line ``ValueError`` before
    anything is drawn or written: ``out_path`` must end in ``.html`` and be nothing yet or a regular file (not a
    folder, a FIFO ...) in a folder that is, or can be made, writable; its figures folder ``<stem>_figures`` must
    be nothing yet or a folder (no link, file or FIFO); ``dpi`` an integer in [1, :data:`MAX_DPI`]."""
    if isinstance(dpi, bool) or not isinstance(dpi, numbers.Integral) or not 1 <= dpi <= MAX_DPI:
        raise ValueError(f"dpi must be an integer in [1, {MAX_DPI}], got {shown_value(dpi)}")
    if not isinstance(out_path, (str, os.PathLike)):
        raise ValueError(f"report path must be a path ending in .html, got {type(out_path).__name__} "
                         f"{shown_value(out_path)}")
    out = Path(out_path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"report path must end in .html, got {str(out)!r}")
    refuse_non_file(out, "an HTML report file (or nothing there)")
    check_writable_dir(out.parent, "folder for the report")
    figures_dir = out.parent / f"{out.stem}_figures"
    # a shared folder's link would put the figures wherever it points; a file (or a FIFO) there cannot hold them
    if figures_dir.is_symlink() or (figures_dir.exists() and not figures_dir.is_dir()):
        what = "a symbolic link" if figures_dir.is_symlink() else describe_non_file(figures_dir) or "a file"
        raise ValueError(f"{figures_dir}: {what}; expected a folder or nothing there (the report's figures are "
                         "written in it, never through a link)")
    return out, figures_dir


def write_html_document(out_path: str | os.PathLike, sections: Sequence[ReportSection], title: str,
                        intro_html: str = "", dpi: int = 100, generator: str = "layerscale report") -> Report:
    """Write ``sections`` as one self-contained HTML page at ``out_path`` (figures embedded as base64 PNG, each
    also written to ``<out stem>_figures/<section file stem>.png``): the title, a generated-by line, the trusted
    ``intro_html``, then each section's heading, paragraph, figure and trusted HTML. Every file is written
    atomically. Raises a one-line ``ValueError``, before anything is written, for a bad argument
    (:func:`check_document_target`; ``sections`` not :class:`ReportSection` objects, ``title`` not a string)."""
    sections = _checked_sections("sections", sections)
    if not isinstance(title, str):
        raise ValueError(f"title must be a string, got {type(title).__name__} {shown_value(title)}")
    out, figures_dir = check_document_target(out_path, dpi)
    out.parent.mkdir(parents=True, exist_ok=True)
    figures_dir.mkdir(exist_ok=True)
    report = Report(out)
    blocks = []
    for section in sections:
        parts = [f"<h2>{html.escape(section.title)}</h2>"]
        if section.text:
            parts.append(f"<p>{html.escape(section.text)}</p>")
        if section.figure is not None:
            data = figure_png_bytes(section.figure, dpi)
            path = figures_dir / f"{section.file_stem}.png"
            write_bytes_atomic(path, data)
            report.figure_paths[section.file_stem] = path
            encoded = base64.b64encode(data).decode("ascii")
            parts.append(f'<img alt="{html.escape(section.title)}" src="data:image/png;base64,{encoded}">')
        if section.html:
            parts.append(section.html)
        blocks.append("\n".join(parts))

    document = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{REPORT_CSS}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="meta">Generated {time.strftime('%Y-%m-%d %H:%M')} by <code>{html.escape(generator)}</code>.
Figures are embedded; the same PNGs are in <code>{html.escape(figures_dir.name)}/</code>.</p>
{intro_html}
{''.join(blocks)}
</body></html>
"""
    write_bytes_atomic(out, document.encode("utf-8"))
    return report
