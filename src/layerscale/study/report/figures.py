"""The study report's figures: the metric against depth with 95 % bands, the learning-rate sensitivity at the
first rung of tuning, and the training curves of every final run, one small panel per method at each depth.

Every figure colours a method the same way (:func:`method_colors`, in the study's method order) and is a bare
``Figure`` on its own canvas (:func:`layerscale.diagnostics.plots.new_figure`; no pyplot state).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...diagnostics.plots import new_figure, run_colors
from ...diagnostics.run_data import RunData
from ..design.grid import StudySpec, format_lr
from .results import CellResult, Metric
from ..run.tuning import RungResult

__all__ = ["method_colors", "table_title", "plot_metric_vs_depth", "plot_lr_sensitivity", "figure_depth_curves",
           "validation_label", "score_to_display"]

_LN2 = math.log(2)
_DIVERGED_MARK = dict(marker="x", s=70, linewidths=2.2, clip_on=False, zorder=5)


def method_colors(methods: Sequence[str]) -> dict[str, Any]:
    """One colour per method, fixed by its position in the study's method list."""
    return dict(zip(methods, run_colors(len(methods))))


def table_title(spec: StudySpec, table: str) -> str:
    """What a table holds, in words: its learning rate."""
    if table == "shared":
        return f"every method at the shared learning rate {format_lr(spec.shared_lr)}"
    if spec.tuned:
        return "each method at its own tuned learning rate"
    return f"every method at the learning rate {format_lr(spec.shared_lr)} (not tuned)"


def _depth_axis(ax, depths: Sequence[int], shape_sweep: bool = False) -> None:
    """Log2 depth axis whose ticks are exactly the studied depths; under a shape sweep the label says that the
    width changes with the depth."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(depths), [str(d) for d in depths])
    ax.minorticks_off()
    low, high = min(depths), max(depths)
    ax.set_xlim(low / 2 ** 0.35, high * 2 ** 0.35)
    ax.set_xlabel("residual blocks at a fixed parameter budget (width chosen per cell; log scale)" if shape_sweep
                  else "depth (residual blocks, log scale)")


def _bottom_marks(ax, xs, color) -> None:
    """✕ on the x axis (x in data units, y at the bottom edge of the axes)."""
    from matplotlib.transforms import blended_transform_factory

    ax.scatter(xs, [0.0] * len(xs), color=color, transform=blended_transform_factory(ax.transData, ax.transAxes),
               **_DIVERGED_MARK)


def plot_metric_vs_depth(spec: StudySpec, cells: Sequence[CellResult], metric: Metric):
    """The headline: ``metric`` (mean over seeds) against depth, one line per method, the 95 % t-interval as a
    shaded band and a bar at each cell; a cell with one seed (n = 1) is an open marker without a band; a cell
    whose runs all diverged is a ✕ on the x axis. One panel for the tuned table and, when the study is tuned and
    also ran the shared table, a second panel for it (same y axis). Methods are spread slightly along x so that
    their bars do not hide each other. The y axis stays within the metric's range (0–100 % for accuracy, ≥ 0 for
    bits per byte) even where a wide interval (e.g. of two seeds) reaches past it."""
    tables = ["tuned"] + (["shared"] if spec.tuned and spec.shared_table else [])
    fig, axes = new_figure(max(9.0, 6.6 * len(tables) + 0.4), 5.4, 1, len(tables), sharey=True)
    colors = method_colors(spec.methods)
    spread = 0.045 * (len(spec.methods) - 1)
    for ax, table in zip(axes[0], tables):
        for index, method in enumerate(spec.methods):
            color = colors[method]
            shift = 2 ** (-spread / 2 + 0.045 * index) if len(spec.methods) > 1 else 1.0
            mine = sorted((c for c in cells if c.table == table and c.method == method), key=lambda c: c.depth)
            shown = [c for c in mine if c.test is not None]
            if shown:
                xs = [c.depth * shift for c in shown]
                ax.plot(xs, [c.test.mean for c in shown], color=color, lw=1.8, zorder=3)
                with_ci = [(x, c) for x, c in zip(xs, shown) if c.test.low is not None]
                single = [(x, c) for x, c in zip(xs, shown) if c.test.low is None]
                if with_ci:
                    bx = [x for x, _ in with_ci]
                    ax.fill_between(bx, [c.test.low for _, c in with_ci], [c.test.high for _, c in with_ci],
                                    color=color, alpha=0.16, lw=0, zorder=1)
                    ax.errorbar(bx, [c.test.mean for _, c in with_ci],
                                yerr=[[c.test.mean - c.test.low for _, c in with_ci],
                                      [c.test.high - c.test.mean for _, c in with_ci]],
                                fmt="o", ms=5.5, color=color, capsize=3, lw=1.2, zorder=4)
                if single:
                    ax.plot([x for x, _ in single], [c.test.mean for _, c in single], ls="none", marker="o",
                            ms=7, mfc="white", mec=color, mew=1.8, zorder=4)
                for x, c in zip(xs, shown):
                    if c.diverged:
                        ax.annotate(f"{c.diverged}/{c.runs} diverged", (x, c.test.mean), xytext=(4, -11),
                                    textcoords="offset points", fontsize=7.5, color=color)
            lost = [c.depth * shift for c in mine if c.test is None and c.runs and c.diverged == c.runs]
            if lost:
                _bottom_marks(ax, lost, color)
        _depth_axis(ax, spec.depths, shape_sweep=bool(spec.shapes))
        ax.set_title(table_title(spec, table).capitalize(), fontsize=11)
        ax.grid(True, alpha=0.3)
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    axes[0, 0].set_ylabel(f"{metric.name}, {direction}")
    low, high = axes[0, 0].get_ylim()  # an interval may reach past what the metric can take: clip the axis
    axes[0, 0].set_ylim(max(low, 0.0), min(high, 100.0) if metric.classification else high)
    in_tables = [c for c in cells if c.table in tables]
    _headline_legend(fig, spec.methods, colors,
                     single=any(c.test is not None and c.test.low is None for c in in_tables),
                     lost=any(c.test is None and c.runs and c.diverged == c.runs for c in in_tables))
    against = "blocks at equal parameters" if spec.shapes else "depth"
    fig.suptitle(f"{metric.name.capitalize()} against {against}: mean over seeds with 95 % t-interval",
                 fontsize=13, fontweight="bold")
    return fig


def _headline_legend(fig, methods, colors, single: bool, lost: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], color=colors[m], lw=2, marker="o", ms=5) for m in methods]
    labels = list(methods)
    handles.append(Patch(color="0.5", alpha=0.3))
    labels.append("95 % interval over seeds")
    if single:
        handles.append(Line2D([], [], ls="none", marker="o", ms=7, mfc="white", mec="0.3"))
        labels.append("one seed (n = 1): no interval")
    if lost:
        handles.append(Line2D([], [], ls="none", marker="x", ms=8, mew=2.2, color="0.3"))
        labels.append("every run diverged")
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=9, frameon=False)


def validation_label(metric: Metric) -> str:
    return "validation accuracy (%)" if metric.classification else "validation bits per byte"


def score_to_display(score: float, metric: Metric) -> float | None:
    """A tuning score (:func:`layerscale.study.run.tuning.run_score`: accuracy as a fraction, or minus the loss in
    nats, larger is better) in the report's units: accuracy in %, or bits per byte; ``None`` when diverged."""
    if not math.isfinite(score):
        return None
    return 100.0 * score if metric.classification else -score / _LN2


def plot_lr_sensitivity(spec: StudySpec, rungs: dict[tuple[str, int], list[RungResult]],
                        chosen: dict[tuple[str, int], float], metric: Metric):
    """One panel per depth: the validation score at rung 0 of successive halving (every learning rate trained
    for the same first share of the budget, with the tuning seed) against the learning rate (log axis), one line
    per method (methods drawn side by side, a few percent apart along x, so that equal scores stay visible); the
    rate finally chosen for the cell is ringed; a rate that diverged is a ✕ on the x axis."""
    depths = list(spec.depths)
    ncols = min(4, len(depths))
    nrows = math.ceil(len(depths) / ncols)
    fig, axes = new_figure(4.3 * ncols + 0.4, 3.6 * nrows + 0.9, nrows, ncols, sharey=True)
    colors = method_colors(spec.methods)
    rates = sorted(spec.lrs)
    for index, ax in enumerate(axes.ravel()):
        if index >= len(depths):
            ax.set_visible(False)
            continue
        depth = depths[index]
        missing = []
        for position, method in enumerate(spec.methods):
            cell_rungs = rungs.get((method, depth)) or []
            if not cell_rungs:
                missing.append(method)
                continue
            shift = 2 ** (0.04 * (position - (len(spec.methods) - 1) / 2))  # methods side by side at each rate
            scores = cell_rungs[0].scores
            lrs = sorted(scores)
            values = [score_to_display(scores[lr], metric) for lr in lrs]
            ax.plot([lr * shift for lr in lrs], [math.nan if v is None else v for v in values], color=colors[method],
                    marker="o", ms=4.5, lw=1.6)
            lost = [lr * shift for lr, v in zip(lrs, values) if v is None]
            if lost:
                _bottom_marks(ax, lost, colors[method])
            pick = chosen.get((method, depth))
            if pick in scores and (value := score_to_display(scores[pick], metric)) is not None:
                ax.plot([pick * shift], [value], ls="none", marker="o", ms=12, mfc="none", mec=colors[method], mew=2)
        ax.set_xscale("log")
        ax.set_xticks(rates, [format_lr(lr) for lr in rates])
        ax.minorticks_off()
        if rates:
            ax.set_xlim(rates[0] / 1.6, rates[-1] * 1.6)
        ax.set_xlabel("learning rate (log scale)")
        ax.set_title(f"depth {depth}", fontsize=11)
        ax.grid(True, alpha=0.3)
        if missing:
            ax.text(0.02, 0.98, "not tuned yet: " + ", ".join(missing), transform=ax.transAxes, va="top",
                    fontsize=8, color="0.35", wrap=True)
    for row in axes:
        row[0].set_ylabel(validation_label(metric) + (" ↑" if metric.higher_is_better else " ↓"))
    _sensitivity_legend(fig, spec.methods, colors, lost=any(
        not math.isfinite(v) for cell in spec.cells() for r in (rungs.get(cell) or [])[:1] for v in r.scores.values()))
    fig.suptitle("Learning-rate sensitivity at the first rung of tuning (validation split)", fontsize=13,
                 fontweight="bold")
    return fig


def _sensitivity_legend(fig, methods, colors, lost: bool) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[m], lw=2, marker="o", ms=5) for m in methods]
    labels = list(methods)
    handles.append(Line2D([], [], ls="none", marker="o", ms=11, mfc="none", mec="0.3", mew=2))
    labels.append("chosen learning rate")
    if lost:
        handles.append(Line2D([], [], ls="none", marker="x", ms=8, mew=2.2, color="0.3"))
        labels.append("diverged at this rate")
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=9, frameon=False)


# ---- training curves ------------------------------------------------------------------------------------------

def _series(records: Sequence[dict], key: str, scale: float) -> tuple[list[int], list[float]]:
    points = []
    for r in records:
        value = r.get(key)
        if "event" in r or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            points.append((int(r["step"]), float(value) * scale))
    return [p[0] for p in points], [p[1] for p in points]


def _robust_top(values: list[float]) -> float | None:
    """An upper y limit that keeps a few divergent spikes from flattening every curve: the 98th percentile of
    the values, raised to the largest value when the spread is small."""
    if not values:
        return None
    ordered = sorted(values)
    top = ordered[min(len(ordered) - 1, int(0.98 * len(ordered)))]
    return ordered[-1] if ordered[-1] <= 1.5 * top else 1.15 * top


def figure_depth_curves(depth: int, runs: dict[str, list[tuple[int, RunData | None, str, int | None]]],
                        metric: Metric, label_smoothing: float = 0.0, lrs: dict[str, float] | None = None,
                        eval_name: str = "validation"):
    """The curves of every final run at ``depth``: one row per method, all its seeds in it (one colour per seed;
    train solid, validation dashed with markers). Columns: the loss — train and validation on the same axes when
    the training loss is unsmoothed, on two separate axes when ``label_smoothing > 0`` (the training loss then
    includes the smoothing term and the validation loss does not) — and, for classifiers, accuracy. Losses of
    language models are in bits per byte (loss / ln 2). A diverged run ends in ✕ at its last step; a run without
    records yet is named in its row.

    ``runs``: method → ``[(seed, RunData or None when nothing is written yet, status, diverged step)]``;
    ``lrs``: method → its learning rate, printed under the method's name. Seeds have their own palette (Dark2),
    distinct from the method colours of the other figures. ``eval_name``: what the ``eval`` records measured
    (``validation``, or the test split in a study without a validation split).
    """
    smoothed = label_smoothing > 0
    loss_scale, loss_unit = (1.0, "nats") if metric.classification else (1.0 / _LN2, "bits per byte")
    columns: list[tuple[str, str, tuple[str, ...]]] = []  # (title, key, splits)
    if smoothed:
        columns += [(f"train loss (with label smoothing {label_smoothing:g}, {loss_unit})", "loss", ("train",)),
                    (f"{eval_name} loss (no smoothing, {loss_unit})", "loss", ("eval",))]
    else:
        columns.append((f"loss ({loss_unit}): train solid, {eval_name} dashed", "loss", ("train", "eval")))
    if metric.classification:
        columns.append((f"accuracy (%): train solid, {eval_name} dashed", "accuracy", ("train", "eval")))
    methods = list(runs)
    seeds = sorted({seed for entries in runs.values() for seed, *_ in entries})
    seed_colors = _seed_colors(seeds)
    fig, axes = new_figure(4.6 * len(columns) + 0.6, 2.35 * len(methods) + 1.2, len(methods), len(columns),
                           sharex=True)
    tops: dict[int, list[float]] = {c: [] for c in range(len(columns))}
    for row, method in enumerate(methods):
        waiting = []
        for seed, run, status, diverged_step in runs[method]:
            if run is None or not (run.train or run.eval):
                waiting.append(f"seed {seed}: {status}")
                continue
            color = seed_colors[seed]
            for col, (_, key, splits) in enumerate(columns):
                ax = axes[row, col]
                scale = 100.0 if key == "accuracy" else loss_scale
                for split in splits:
                    steps, values = _series(run.train if split == "train" else run.eval, key, scale)
                    if not steps:
                        continue
                    # validation above every seed's noisy training curve, or the training curves hide it
                    style = (dict(ls="-", lw=1.3) if split == "train"
                             else dict(ls="--", lw=1.3, marker="o", ms=4, mec="white", mew=0.6, zorder=3))
                    ax.plot(steps, values, color=color, **style)
                    tops[col].extend(values)
                if status == "diverged":
                    last = diverged_step or run.last_step
                    if last is not None:
                        _bottom_marks(ax, [last], color)
        rate = f"\nlr {format_lr(lrs[method])}" if lrs and method in lrs else ""
        axes[row, 0].set_ylabel(method + rate, fontsize=11, fontweight="bold")
        if waiting:
            axes[row, 0].text(0.5, 0.5, "no records yet: " + "; ".join(waiting), transform=axes[row, 0].transAxes,
                              ha="center", va="center", fontsize=9.5, color="0.35", wrap=True)
    for col, (title, key, _) in enumerate(columns):
        top = _robust_top(tops[col])
        for row in range(len(methods)):
            ax = axes[row, col]
            ax.grid(True, alpha=0.3)
            if top is not None and key == "loss":
                ax.set_ylim(0, top * 1.05)
            elif top is not None:
                ax.set_ylim(0, min(100.0, top + 3))
        axes[0, col].set_title(title, fontsize=10)
        axes[-1, col].set_xlabel("optimizer step")
        axes[-1, col].xaxis.get_major_locator().set_params(integer=True)
    _curves_legend(fig, seeds, seed_colors, eval_name,
                   diverged=any(s == "diverged" for e in runs.values() for _, _, s, _ in e))
    fig.suptitle(f"Depth {depth}: every final run (tuned learning rate), one row per method", fontsize=13,
                 fontweight="bold")
    return fig


def _seed_colors(seeds: Sequence[int]) -> dict[int, Any]:
    from matplotlib import colormaps

    cmap = colormaps["Dark2"]
    return {seed: cmap(i % cmap.N) for i, seed in enumerate(seeds)}


def _curves_legend(fig, seeds, seed_colors, eval_name: str, diverged: bool) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=seed_colors[s], lw=2.2) for s in seeds]
    labels = [f"seed {s}" for s in seeds]
    handles += [Line2D([], [], color="0.3", lw=1.3), Line2D([], [], color="0.3", lw=1.3, ls="--", marker="o", ms=3)]
    labels += ["train (mean over the logging window)", eval_name]
    if diverged:
        handles.append(Line2D([], [], ls="none", marker="x", ms=8, mew=2.2, color="0.3"))
        labels.append("diverged (last step)")
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=9, frameon=False)
