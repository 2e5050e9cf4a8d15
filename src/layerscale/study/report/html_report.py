"""The study's HTML report, in the order a reader asks: what is the answer, how fair is it, what are the numbers,
and can I see every run behind them.

1. **Headline**: the test metric against depth, one line per method, 95 % t-interval bands (one panel per table);
   also written beside the report as ``accuracy_vs_depth.png`` (``bits_per_byte_vs_depth.png`` for language
   models).
2. **Learning-rate sensitivity**: the validation score of every rate at the first rung of tuning, per depth.
3. **The tables and the sentences** of ``results.md``, rendered (:mod:`layerscale.study.report.markdown_html`).
4. **Every final run**: per depth, one row per method with the training and validation curves of all its seeds.
5. **γ / α heatmaps** of the final runs (first seed of each method), per depth, from step 0, with a note on every
   method or step without a learnable scale.
6. **Diagnostics warnings** of the final runs, with every field the warning records carry.
7. **Every run** (final and tuning) with its status and a link to its directory.

A partial study renders as far as it goes and says at the top which runs are missing. Everything is read from the
run directories (``runs/<run id>`` for final runs, ``runs/tune/<run id>`` for tuning runs), so the report can be
rebuilt wherever the study folder is copied.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...atomic_io import write_bytes_atomic
from ...diagnostics import plots
from ...diagnostics.report import ReportSection, write_html_document
from ...diagnostics.run_data import RunData
from ...train.records.metrics_log import METRICS_FILE, read_metrics
from .figures import (figure_depth_curves, plot_lr_sensitivity, plot_metric_vs_depth, table_title,
                      validation_label)
from ..design.grid import StudySpec, format_lr
from .markdown_html import markdown_to_html, split_title
from .results import CellResult, RunResult
from ..run.tuning import RungResult

if TYPE_CHECKING:  # study.py imports this module when it writes the report
    from ..design.plan import StudyPlan

__all__ = ["write_study_report", "headline_path", "REPORT_FILE"]

REPORT_FILE = "report.html"
_FINISHED = ("finished", "diverged")
_MAX_LISTED = 30
_MAX_WARNINGS_SHOWN = 60
_EXTRA_CSS = """<style>
.status { background: #fff6e5; border-left: 4px solid #e0a030; padding: 0.5em 1em; }
.status.complete { background: #eef7ee; border-left-color: #5a9a5a; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
</style>"""


def headline_path(study_dir: str | os.PathLike, metric) -> Path:
    """Where the headline PNG is written beside the report: ``accuracy_vs_depth.png`` for classifiers,
    ``bits_per_byte_vs_depth.png`` for language models."""
    name = "accuracy_vs_depth" if metric.classification else "bits_per_byte_vs_depth"
    return Path(study_dir) / f"{name}.png"


# ---- reading the final runs ---------------------------------------------------------------------------------

def _load_run(run_dir: Path, name: str, config: dict, complete: bool) -> RunData | None:
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return None
    return RunData.from_records(name, read_metrics(path), config=config, complete=complete)


def _final_runs(study_dir: Path, spec: StudySpec, results: Sequence[RunResult], cells: Sequence[CellResult]):
    """``{depth: {method: [(seed, RunData | None, status, diverged step)]}}`` for the tuned table's runs."""
    by_id = {r.run_id: r for r in results if r.kind == "final"}
    tuned_lr = {(c.method, c.depth): c.lr for c in cells if c.table == "tuned"}
    out: dict[int, dict[str, list]] = {}
    for depth in spec.depths:
        out[depth] = {}
        for method in spec.methods:
            lr = tuned_lr.get((method, depth), spec.shared_lr)
            entries = []
            if lr is None:  # the cell's tuning is not finished: no tuned final runs yet
                out[depth][method] = entries
                continue
            for seed in spec.seeds_for(method, depth):
                run = spec.run(study_dir, method, depth, lr, seed, "final")
                result = by_id.get(run.run_id)
                status = result.status if result is not None else "pending"
                data = _load_run(run.run_dir, run.run_id, run.config, status in _FINISHED)
                entries.append((seed, data, "in progress" if data is not None and status == "pending" else status,
                                result.diverged_step if result is not None else None))
            out[depth][method] = entries
    return out


# ---- sections -----------------------------------------------------------------------------------------------

def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" … and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


def _status_html(spec: StudySpec, results: Sequence[RunResult], rungs) -> str:
    finals = [r for r in results if r.kind == "final"]
    missing = [r for r in finals if r.status not in _FINISHED]
    untuned = [f"{m} d{d}" for m, d in spec.cells() if spec.tuned and not rungs.get((m, d))]
    diverged = sum(r.status == "diverged" for r in finals)
    counts = f"{len(finals) - len(missing)} of {len(finals)} final runs done ({diverged} of them diverged)"
    if not missing and not untuned:
        return (f'{_EXTRA_CSS}<p class="status complete">Complete: {html.escape(counts)}; '
                f"{sum(r.kind == 'tune' for r in results)} tuning runs.</p>")
    lines = [f"<b>Partial study</b>: {html.escape(counts)}. Figures and tables show what has finished; "
             "re-running the same <code>layerscale study</code> command continues it and rewrites this report."]
    if missing:
        by_status: dict[str, list[str]] = {}
        for r in missing:
            by_status.setdefault(r.status, []).append(r.run_id)
        for status, ids in sorted(by_status.items()):
            lines.append(f"Not finished ({html.escape(status)}, {len(ids)}): {html.escape(_listed(ids))}")
    if untuned:
        lines.append(f"Learning rate not tuned yet ({len(untuned)} cells): {html.escape(_listed(untuned))}")
    return _EXTRA_CSS + '<div class="status">' + "<br>".join(lines) + "</div>"


def _headline_section(spec: StudySpec, plan: StudyPlan, cells: Sequence[CellResult], results: Sequence[RunResult],
                      name: str) -> ReportSection:
    metric = plan.metric
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    shown = [c for c in cells if c.test is not None]
    single = [f"{c.method} d{c.depth}" + (f" ({c.table})" if spec.tuned and spec.shared_table else "")
              for c in shown if c.test.low is None]
    empty = [f"{c.method} d{c.depth}" + (f" ({c.table})" if spec.tuned and spec.shared_table else "")
             for c in cells if c.test is None and not (c.runs and c.diverged == c.runs)]
    text = (f"{metric.name.capitalize()}, {direction}, on the test split, read once per run when it ends: each point "
            f"is the mean over the {len(spec.seeds)} seed(s) of one method at one depth; the shaded band and the "
            "bar are its 95 % t-interval over seeds. An open marker is a cell with a single finished seed (n = 1): "
            "no interval exists, so none is drawn. A ✕ on the depth axis marks a cell whose runs all diverged; "
            "'k/n diverged' beside a point: those runs are left out of its mean. Methods are shifted slightly "
            "along the depth axis so that their bars do not overlap. ")
    if spec.tuned and spec.shared_table:
        text += (f"Left: {table_title(spec, 'tuned')}; right: {table_title(spec, 'shared')} (what a user gets by "
                 "only switching the residual method). ")
    else:
        text += table_title(spec, "tuned").capitalize() + ". "
    past = [c for c in shown if c.test.low is not None and (c.test.low < 0 or (metric.classification and
                                                                             c.test.high > 100))]
    if past:
        text += (f"{len(past)} interval(s) reach past the metric's possible range (few seeds give wide intervals); "
                 "the axis stops at that range. ")
    if single and len(single) == len(shown):
        text += "Every cell has fewer than 3 finished seeds: no band is drawn (the tables list each seed). "
    elif single:
        text += f"Fewer than 3 seeds (no band; the tables list each seed): {_listed(single)}. "
    if empty:
        text += f"No finished run yet (no point): {_listed(empty)}. "
    untested = [r.run_id for r in results if r.kind == "final" and r.status == "finished" and r.test is None]
    if untested:
        text += (f"{len(untested)} finished run(s) have no test-split evaluation, so no test metric: "
                 f"{_listed(untested)}.")
    return ReportSection(f"{metric.name.capitalize()} against depth", figure=plot_metric_vs_depth(spec, cells, metric),
                         text=text.strip(), name=name)


def _sensitivity_section(spec: StudySpec, plan: StudyPlan, cells, rungs) -> ReportSection:
    title = "Learning-rate sensitivity"
    if spec.fixed:
        return ReportSection(title, text="The study tuned nothing: each cell's learning rate was fixed by its design "
                                         "(study.json fixed_rates).")
    if not spec.tuned:
        return ReportSection(title, text=f"The study was not tuned: every run used the learning rate "
                                         f"{format_lr(spec.shared_lr)} (pass several rates with --lrs to tune and "
                                         "get this figure).")
    if not any(rungs.get(cell) for cell in spec.cells()):
        return ReportSection(title, text="No rung of the learning-rate tuning has finished yet.")
    chosen = {(c.method, c.depth): c.lr for c in cells if c.table == "tuned"}
    steps = sorted({r[0].step for r in rungs.values() if r})
    step_text = " / ".join(str(s) for s in steps)
    if spec.tuning == "grid":
        how = (f"at the end of training: every learning rate of {', '.join(format_lr(lr) for lr in spec.lrs)} "
               f"trained for the full {plan.total_steps} steps with every reported seed; each point is the mean over "
               "the seeds. Ringed: the rate chosen for the cell (the best mean, or the rate nearest the shared one "
               "among those tied with it).")
    else:
        how = (f"after the first rung of successive halving: every learning rate of "
               f"{', '.join(format_lr(lr) for lr in spec.lrs)} trained for {step_text} of the {plan.total_steps} "
               f"steps of the full budget, on the full budget's learning-rate schedule, with the tuning seed(s) "
               f"{', '.join(map(str, spec.tuning_seeds))} (never reported seeds); each point is the mean over them. "
               "Ringed: the rate finally chosen for the cell (after all rungs and ties, so it can differ from the "
               "best point here).")
    text = (f"{validation_label(plan.metric).capitalize()} on the validation split (carved from the training data; "
            f"the test split is not used) {how} One panel per depth, one line per method. ✕ on the learning-rate "
            "axis: that rate diverged.")
    return ReportSection(title, figure=plot_lr_sensitivity(spec, rungs, chosen, plan.metric), text=text,
                         name="lr_sensitivity")


def _curves_sections(spec: StudySpec, plan: StudyPlan, cells, finals) -> list[ReportSection]:
    smoothing = float(spec.base.get("optim", {}).get("label_smoothing", 0.0) or 0.0)
    if smoothing > 0:
        loss_text = (f"The base config trains with label smoothing {smoothing:g}: the training loss includes the "
                     "smoothing term and the validation loss does not, so they are drawn on separate axes and their "
                     "levels must not be compared with each other (accuracy is unaffected by smoothing).")
    else:
        loss_text = ("No label smoothing: the training and validation losses are the same cross-entropy and share "
                     "one axis.")
    tuned_lr = {(c.method, c.depth): c.lr for c in cells if c.table == "tuned"}
    if spec.validation_fraction > 0:
        eval_name, eval_text = "validation", "validation is the held-out split used for tuning and early stopping"
    else:
        eval_name = "test-split evaluation"
        eval_text = ("there is no validation split (validation fraction 0), so the periodic evaluation is on the "
                     "test split")
    sections = []
    for depth in spec.depths:
        runs = finals[depth]
        rates = ", ".join(f"{m} {format_lr(tuned_lr.get((m, depth), spec.shared_lr))}" for m in spec.methods)
        text = (f"Every final run at depth {depth} of the tuned table ({len(spec.seeds)} seed(s) per method, one "
                f"colour per seed; learning rate per method: {rates}). Training curves are means over the logging "
                f"window; {eval_text}. {loss_text} Rows share the "
                "step axis; every panel of a column has the same y range, so methods compare directly.")
        sections.append(ReportSection(f"Training curves, depth {depth}", text=text, name=f"curves_depth_{depth}",
                                      figure=figure_depth_curves(depth, runs, plan.metric, smoothing,
                                                                 {m: tuned_lr.get((m, depth), spec.shared_lr)
                                                                  for m in spec.methods}, eval_name)))
    return sections


def _scale_notes(run: RunData) -> list[str]:
    """Where the heatmap of ``run`` is blank: no learnable scale at all, none at some steps, or exactly 0."""
    absent, zero = [], []
    for record in run.diagnostics:
        values = [(b.get(branch) or {}).get("scale_mean") for b in record["blocks"] for branch in ("attn", "mlp")]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not numbers:
            absent.append(record["step"])
        elif any(not math.isfinite(v) or v <= 0 for v in numbers) or len(numbers) < len(values):
            zero.append(record["step"])
    if len(absent) == len(run.diagnostics):
        return [f"{run.method}: no learnable residual scale (no heatmap)"]
    notes = []
    if absent:
        notes.append(f"{run.method}: no learnable scale recorded at step(s) {_steps_text(absent)} (blank columns)")
    if zero:
        notes.append(f"{run.method}: some blocks have a scale of exactly 0, or none, at step(s) {_steps_text(zero)} "
                     "(blank cells; a logarithmic colour scale cannot show 0, e.g. ReZero's α at initialisation)")
    return notes


def _steps_text(steps: Sequence[int]) -> str:
    return ", ".join(map(str, steps[:8])) + (f" … ({len(steps)} records)" if len(steps) > 8 else "")


def _heatmap_sections(spec: StudySpec, finals) -> list[ReportSection]:
    sections = []
    for depth in spec.depths:
        title = f"Residual scales γ / α per block, depth {depth}"
        chosen, waiting = [], []
        for method in spec.methods:
            run = next((r for _, r, _, _ in finals[depth][method] if r is not None and r.diagnostics), None)
            (chosen if run is not None else waiting).append(run or method)
        if not chosen:
            sections.append(ReportSection(title, text=f"No diagnostics records at depth {depth} yet (runs pending, "
                                                       "or trained with diagnostics off)."))
            continue
        notes = [n for run in chosen for n in _scale_notes(run)]
        counts = sorted({len(run.diagnostics) for run in chosen})
        text = (f"Mean |γ| (|α| for ReZero-style scalars) of each block's attention and MLP branch (rows, block 1 "
                f"nearest the input) at each diagnostics record (columns), from step 0, for the first seed of each "
                f"method at its tuned learning rate; one logarithmic colour scale for all panels. The first record is "
                f"the forward at initialisation (step 1, before any update). Records per run: "
                f"{', '.join(map(str, counts))}.")
        if notes:
            text += " " + "; ".join(notes) + "."
        if waiting:
            text += f" No diagnostics records yet: {', '.join(waiting)}."
        sections.append(ReportSection(title, figure=plots.figure_scale_heatmaps(chosen), text=text,
                                      name=f"scales_depth_{depth}"))
    return sections


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return str(value)
    return "–" if value is None else str(value)


_WARNING_ORDER = ("step", "block", "branch", "kind", "message", "value", "threshold")


def _warnings_section(spec: StudySpec, finals) -> ReportSection:
    rows = [(run.name, w) for depth in spec.depths for method in spec.methods
            for _, run, _, _ in finals[depth][method] if run is not None for w in run.warnings]
    title = "Diagnostics warnings of the final runs"
    if not rows:
        return ReportSection(title, text="No diagnostics warnings were raised by the final runs of the tuned table.")
    keys = [k for k in _WARNING_ORDER if any(k in w for _, w in rows)]
    keys += sorted({k for _, w in rows for k in w} - set(keys) - {"split"})
    head = "".join(f"<th>{html.escape(k)}</th>" for k in ("run", *keys))
    body = "".join("<tr>" + f"<td>{html.escape(name)}</td>" + "".join(
        f'<td{" class=num" if isinstance(w.get(k), (int, float)) else ""}>{html.escape(_format_value(w.get(k)))}</td>'
        for k in keys) + "</tr>" for name, w in rows[:_MAX_WARNINGS_SHOWN])
    more = (f"<p>… and {len(rows) - _MAX_WARNINGS_SHOWN} more (see each run's metrics.jsonl, split "
            f"diagnostics_warning).</p>" if len(rows) > _MAX_WARNINGS_SHOWN else "")
    text = (f"{len(rows)} warning(s). Every field of the warning records is shown as recorded; value and threshold "
            "are in the units the message states.")
    return ReportSection(title, text=text, html=f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
                                                f"</table>{more}")


def _runs_section(study_dir: Path, spec: StudySpec, plan: StudyPlan, results: Sequence[RunResult]) -> ReportSection:
    head = ("run", "kind", "status", plan.metric.name, "best " + validation_label(plan.metric), "steps",
            "stopped early", "diverged at step")
    rows = []
    for r in sorted(results, key=lambda r: (r.kind != "final", r.depth, spec.methods.index(r.method)
                                            if r.method in spec.methods else 0, r.lr, r.seed)):
        folder = Path("runs") / ("tune" if r.kind == "tune" else "") / r.run_id
        link = (f'<a href="{html.escape(folder.as_posix())}/">{html.escape(r.run_id)}</a>'
                if (study_dir / folder).is_dir() else html.escape(r.run_id))
        cells = (r.kind, r.status, r.test, r.val_best, r.steps, "yes" if r.stopped_early else "",
                 r.diverged_step)
        rows.append(f"<tr><td>{link}</td>" + "".join(
            f'<td{" class=num" if isinstance(c, (int, float)) else ""}>{html.escape(_format_value(c))}</td>'
            for c in cells) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    text = ("Every run of the study, final runs first, then tuning runs (validation only: they never read the test "
            "split). A link opens the run's directory (metrics.jsonl, config, checkpoints).")
    return ReportSection("Every run", text=text,
                         html=f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


# ---- the report ---------------------------------------------------------------------------------------------

def write_study_report(study_dir: Path, spec: StudySpec, plan: StudyPlan, results: list[RunResult],
                       cells: list[CellResult], rungs: dict[tuple[str, int], list[RungResult]], markdown: str) -> Path:
    """Write ``study_dir/report.html`` (sections in the module docstring's order; figures embedded and also in
    ``report_figures/``) and the headline PNG beside it (:func:`headline_path`); every file atomically. Returns the
    HTML path. Raises ``ImportError`` naming the ``plots`` extra without matplotlib."""
    plots.require_matplotlib()
    study_dir = Path(study_dir)
    finals = _final_runs(study_dir, spec, results, cells)
    headline = headline_path(study_dir, plan.metric)
    title, body = split_title(markdown)
    sections = [
        _headline_section(spec, plan, cells, results, headline.stem),
        _sensitivity_section(spec, plan, cells, rungs),
        ReportSection("Tables and what the intervals support", html=markdown_to_html(body, heading_offset=1)),
        *_curves_sections(spec, plan, cells, finals),
        *_heatmap_sections(spec, finals),
        _warnings_section(spec, finals),
        _runs_section(study_dir, spec, plan, results),
    ]
    report = write_html_document(study_dir / REPORT_FILE, sections, title or "Depth study",
                                 intro_html=_status_html(spec, results, rungs) + f"<p>Data: "
                                 f"{html.escape(plan.data_description)}.</p>", generator="layerscale study")
    write_bytes_atomic(headline, report.figure_paths[headline.stem].read_bytes())
    return report.html_path
