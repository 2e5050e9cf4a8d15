"""Figures of training runs and their per-layer diagnostics (matplotlib, extra ``plots``; no pyplot state).

Two layers, both public so other reports can compose them:

* ``plot_*(runs, ..., ax=None)`` draws one panel onto ``ax`` (a new figure when ``None``) and returns the figure;
* ``figure_*(runs)`` lays out the report's standard multi-panel figures from those panels.

``runs`` is a sequence of :class:`~layerscale.diagnostics.run_data.RunData` (or one); each run keeps one colour in
every figure (:func:`run_colors`). Depth profiles are drawn at three moments of each run: ``early`` (its first
diagnostics record, the initialisation when the trainer recorded step 1), ``late`` (its last record) and ``mid``
(the record whose step is nearest the middle of the two).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .run_data import RunData

__all__ = [
    "require_matplotlib", "new_figure", "run_colors", "run_legend", "pick_moments", "readable_log_ticks",
    "MOMENT_STYLES", "BRANCH_TITLES", "NEW_BLOCK_COLOR", "NEW_BLOCK_MARK",
    "plot_metric", "plot_scale_heatmap", "plot_ratio_vs_depth", "plot_block_stat_vs_depth",
    "figure_curves", "figure_scale_heatmaps", "figure_ratio_vs_depth", "figure_signal_vs_depth",
]

_NO_DIAGNOSTICS = "no diagnostics records in these runs (trained with diagnostics off?)"
_METRIC_LABELS = {"loss": "cross-entropy loss (nats)", "accuracy": "accuracy (fraction correct)",
                  "perplexity": "perplexity (exp of the loss)"}
BRANCH_TITLES = {"attn": "attention branch", "mlp": "MLP branch"}
NEW_BLOCK_COLOR, NEW_BLOCK_MARK = "#d62728", "▸"  # the blocks layerscale grow inserted
MOMENT_STYLES = {"early": ":", "mid": "--", "late": "-"}
_BLOCK_STATS = {
    "stream_rms": ("stream RMS after the block", "RMS of the stream"),
    "grad_norm": ("gradient norm of the block's weights", "‖∇L‖ of the block's weights"),
    "update_ratio": ("update-to-weight ratio per step", "‖ΔW‖ / ‖W‖"),
}


def require_matplotlib():
    """Import matplotlib, or raise ``ImportError`` naming the ``plots`` extra."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plots and reports need matplotlib: pip install 'torch-layerscale[plots]'") from None
    return matplotlib


def new_figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **kwargs):
    """A ``Figure`` on its own Agg canvas, and its axes array. pyplot is never used, so no global backend or
    figure registry is touched (safe in servers, threads and notebooks alike)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def _axis(ax, width: float = 6.4, height: float = 4.0):
    if ax is not None:
        return ax
    return new_figure(width, height)[1][0, 0]


def _runs(runs: RunData | Sequence[RunData]) -> list[RunData]:
    return [runs] if isinstance(runs, RunData) else list(runs)


def run_colors(n: int) -> list[Any]:
    """``n`` distinct colours: tab10, then tab20 for more runs."""
    require_matplotlib()
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def pick_moments(records: Sequence[dict]) -> dict[str, dict]:
    """``{"early", "mid", "late"}`` → record (the first, the nearest the middle step, the last), duplicates
    dropped: one record gives only ``early``, two give ``early`` and ``late``."""
    if not records:
        return {}
    first, last = records[0], records[-1]
    middle = (first["step"] + last["step"]) / 2
    mid = min(records, key=lambda r: abs(r["step"] - middle))
    out = {"early": first}
    if mid is not first and mid is not last:
        out["mid"] = mid
    if last is not first:
        out["late"] = last
    return out


def _value(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.35", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _short_number(value: float, _position=None) -> str:
    """Tick labels such as 0.7, 1e-05, 2.5e-03: ``%.3g`` instead of matplotlib's 7×10⁻¹ on short log ranges."""
    return f"{value:.3g}"


def readable_log_ticks(axis) -> None:
    """Plain number labels on a log ``axis`` (an ``ax.yaxis`` or a colour bar's axis). Minor ticks are labelled
    too when the axis spans less than a decade (all of them) or two (2× and 5×), so that a short range never
    shows a single label."""
    from matplotlib.ticker import FuncFormatter

    def minor(value: float, position=None) -> str:
        low, high = sorted(axis.get_view_interval())  # read when drawn: the final limits
        if low <= 0 or value <= 0:
            return ""
        mantissa = round(value / 10 ** math.floor(math.log10(value) + 1e-9))
        span = high / low
        return _short_number(value) if span < 10 or (span < 100 and mantissa in (2, 5)) else ""

    axis.set_major_formatter(FuncFormatter(_short_number))
    axis.set_minor_formatter(FuncFormatter(minor))


def run_legend(fig, runs: Sequence[RunData], colors: Sequence[Any], styles: dict[str, dict] | None = None,
               title: str | None = None, per_row: int = 3):
    """One legend under the figure's panels, outside the axes so that it never hides data: rows of coloured
    lines, one per run (its :attr:`RunData.label`), then a row of grey lines, one per entry of ``styles``
    (label → ``Line2D`` keyword arguments, e.g. the line style of each moment of training)."""
    from matplotlib.lines import Line2D

    entries = [(Line2D([], [], color=c, lw=2.5), run.label) for run, c in zip(runs, colors)]
    style_entries = [(Line2D([], [], color="0.25", **{"lw": 1.6, **style}), label)
                     for label, style in (styles or {}).items()]
    columns = max(1, min(per_row, max(len(entries), 1)), len(style_entries))
    rows = [entries[k:k + columns] for k in range(0, len(entries), columns)]
    if style_entries:
        rows.append(style_entries)
    blank = (Line2D([], [], alpha=0), "")
    grid = [row + [blank] * (columns - len(row)) for row in rows]
    ordered = [grid[r][c] for c in range(columns) for r in range(len(grid))]  # matplotlib fills column by column
    handles, labels = zip(*ordered)
    return fig.legend(handles, labels, loc="outside lower center", ncol=columns, fontsize=9, title=title,
                      title_fontsize=9, frameon=False)


def _moment_styles(runs: Sequence[RunData], moments: Sequence[str] = tuple(MOMENT_STYLES)) -> dict[str, dict]:
    """Legend entries for the moments present; with one run they carry its steps, e.g. ``mid (step 88)``."""
    picked = [pick_moments(run.diagnostics) for run in runs]
    styles = {}
    for moment in moments:
        if not any(moment in p for p in picked):
            continue
        label = f"{moment} (step {picked[0][moment]['step']})" if len(runs) == 1 else moment
        styles[label] = {"ls": MOMENT_STYLES[moment], "marker": "o", "ms": 3}
    return styles


# ---- panels -------------------------------------------------------------------------------------------------

def plot_metric(runs: RunData | Sequence[RunData], metric: str = "loss", ax=None, colors=None):
    """``metric`` (a field of the train / eval records, e.g. ``loss``, ``accuracy``) against the optimizer step:
    train records solid, eval records dashed with markers, one colour per run. Returns the figure."""
    runs = _runs(runs)
    ax = _axis(ax)
    colors = colors or run_colors(len(runs))
    drawn = False
    for run, color in zip(runs, colors):
        for records, style in ((run.train, dict(ls="-", lw=1.4)), (run.eval, dict(ls="--", marker="o", ms=3.5))):
            # trainer events (e.g. a non-finite step) share the split but are not points of the curve
            points = [(r["step"], v) for r in records if "event" not in r and math.isfinite(v := _value(r.get(metric)))]
            if points:
                steps, values = zip(*points)
                ax.plot(steps, values, color=color, **style)
                drawn = True
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(_METRIC_LABELS.get(metric, metric.replace("_", " ")))
    ax.set_title(f"{metric.replace('_', ' ')}: train (solid), eval (dashed)")
    ax.grid(True, alpha=0.3)
    if not drawn:
        _no_data(ax, f"no '{metric}' records")
    return ax.figure


def plot_scale_heatmap(run: RunData, branch: str = "attn", ax=None, norm=None):
    """``mean|γ|`` of ``branch`` as a heatmap, block (rows, input at the top) × step (columns), log colour scale.

    Returns ``(figure, mappable)``; the mappable (``None`` when the branch has no scale) feeds a colour bar.
    """
    require_matplotlib()
    from matplotlib.colors import LogNorm

    ax = _axis(ax)
    records = run.diagnostics
    ax.set_title(f"{run.label}\n{BRANCH_TITLES.get(branch, branch)}: mean |γ|", fontsize=10)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("block (1 = nearest the input)")
    if not records:
        _no_data(ax, _NO_DIAGNOSTICS)
        return ax.figure, None
    import numpy as np

    grid = np.array([[_value((b.get(branch) or {}).get("scale_mean")) for b in r["blocks"]] for r in records]).T
    if not np.isfinite(grid).any():
        _no_data(ax, f"no learnable scale on this branch\n(method: {run.method})")
        return ax.figure, None
    steps = np.array([r["step"] for r in records], dtype=float)
    if len(steps) == 1:
        x_edges = np.array([steps[0] - 0.5, steps[0] + 0.5])
    else:
        mids = (steps[1:] + steps[:-1]) / 2
        x_edges = np.concatenate(([steps[0] - (mids[0] - steps[0])], mids, [steps[-1] + (steps[-1] - mids[-1])]))
    if steps[0] >= 0:  # from step 0, never below: the record of step 1 is the state at initialisation
        x_edges[0] = 0.0 if steps[0] <= 1 else max(0.0, x_edges[0])
    y_edges = np.arange(grid.shape[0] + 1) + 0.5
    positive = grid[np.isfinite(grid) & (grid > 0)]
    if norm is None and positive.size:
        norm = LogNorm(vmin=positive.min(), vmax=max(positive.max(), positive.min() * 1.0001))
    masked = np.ma.masked_where(~np.isfinite(grid) | (grid <= 0), grid)
    mesh = ax.pcolormesh(x_edges, y_edges, masked, norm=norm, cmap="viridis", shading="flat")
    ax.set_ylim(y_edges[-1], y_edges[0])  # block 1 at the top: depth reads downwards
    ax.xaxis.get_major_locator().set_params(integer=True)  # steps are whole numbers
    ax.set_yticks(_block_ticks(grid.shape[0]))
    new = run.new_blocks
    if new:  # a grown model: a marker at the left edge of each row that layerscale grow inserted
        ax.plot([x_edges[0]] * len(new), new, ls="none", marker=">", ms=4, color=NEW_BLOCK_COLOR, clip_on=False)
        ax.set_ylabel(f"block (1 = nearest the input; {NEW_BLOCK_MARK} = new)")
    return ax.figure, mesh


def _block_ticks(n: int) -> list[int]:
    step = max(1, math.ceil(n / 12))
    return list(range(1, n + 1, step))


def plot_ratio_vs_depth(runs: RunData | Sequence[RunData], branch: str = "attn", ax=None,
                        moments: Sequence[str] = ("early", "mid", "late"), colors=None):
    """Branch-to-stream ratio ``‖γ ⊙ F(x)‖ / ‖x‖`` of ``branch`` against the block index, log scale; one colour
    per run, one line style per moment of training (dotted early, dashed mid, solid late)."""
    runs = _runs(runs)
    ax = _axis(ax)
    colors = colors or run_colors(len(runs))
    _depth_profile(ax, runs, colors, moments, lambda block: (block.get(branch) or {}).get("ratio"))
    ax.set_title(f"{BRANCH_TITLES.get(branch, branch)}: ‖branch output‖ / ‖stream‖")
    ax.set_ylabel("branch-to-stream ratio (log scale)")
    return ax.figure


def plot_block_stat_vs_depth(runs: RunData | Sequence[RunData], stat: str = "stream_rms", ax=None,
                             moments: Sequence[str] = ("early", "mid", "late"), colors=None):
    """A per-block statistic (``stream_rms``, ``grad_norm`` or ``update_ratio``) against the block index, log
    scale; one colour per run, one line style per moment."""
    if stat not in _BLOCK_STATS:
        raise ValueError(f"stat must be one of {sorted(_BLOCK_STATS)}, got {stat!r}")
    runs = _runs(runs)
    ax = _axis(ax)
    colors = colors or run_colors(len(runs))
    _depth_profile(ax, runs, colors, moments, lambda block: block.get(stat))
    title, ylabel = _BLOCK_STATS[stat]
    ax.set_title(title)
    ax.set_ylabel(f"{ylabel} (log scale)")
    return ax.figure


def _depth_profile(ax, runs, colors, moments, value_of) -> None:
    drawn = False
    for run, color in zip(runs, colors):
        for moment, record in pick_moments(run.diagnostics).items():
            if moment not in moments:
                continue
            values = [_value(value_of(b)) for b in record["blocks"]]
            depth = list(range(1, len(values) + 1))
            positive = [v if v > 0 else math.nan for v in values]  # log axis: zeros (ReZero at init) are gaps
            if any(math.isfinite(v) for v in positive):
                ax.plot(depth, positive, color=color, ls=MOMENT_STYLES[moment], marker="o", ms=3, lw=1.6)
                drawn = True
    ax.set_xlabel("block (1 = nearest the input)")
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.set_yscale("log")
        readable_log_ticks(ax.yaxis)
        ax.xaxis.get_major_locator().set_params(integer=True)
    else:
        _no_data(ax, "no positive values recorded" if any(run.diagnostics for run in runs) else _NO_DIAGNOSTICS)


# ---- the report's figures -----------------------------------------------------------------------------------

def figure_curves(runs: RunData | Sequence[RunData]):
    """Loss and accuracy against the step, train and eval, all runs (two panels, shared run legend)."""
    runs = _runs(runs)
    colors = run_colors(len(runs))
    fig, axes = new_figure(12, 4.6, 1, 2)
    for ax, metric in zip(axes[0], ("loss", "accuracy")):
        plot_metric(runs, metric, ax=ax, colors=colors)
    run_legend(fig, runs, colors, {"train": {"ls": "-"}, "eval": {"ls": "--", "marker": "o", "ms": 3.5}})
    fig.suptitle("Training curves", fontsize=13, fontweight="bold")
    return fig


def figure_scale_heatmaps(runs: RunData | Sequence[RunData]):
    """``mean|γ|`` heatmaps (block × step) of the attention and MLP branches, one row per run, one shared log
    colour scale so that runs and branches compare directly."""
    require_matplotlib()
    import numpy as np
    from matplotlib.colors import LogNorm

    runs = _runs(runs)
    scaled = [run for run in runs if _has_scales(run)]
    fig_title = "LayerScale |γ| per block during training"
    if not scaled:
        fig, axes = new_figure(12, 2.0)
        if not any(run.diagnostics for run in runs):
            _no_data(axes[0, 0], _NO_DIAGNOSTICS)
        else:
            _no_data(axes[0, 0], "none of these runs has a learnable residual scale (methods: "
                     + ", ".join(sorted({run.method for run in runs})) + ")")
        fig.suptitle(fig_title, fontsize=13, fontweight="bold")
        return fig
    values = [_value((b.get(branch) or {}).get("scale_mean")) for run in scaled for r in run.diagnostics
              for b in r["blocks"] for branch in ("attn", "mlp")]
    positive = np.array([v for v in values if math.isfinite(v) and v > 0])
    norm = LogNorm(vmin=positive.min(), vmax=max(positive.max(), positive.min() * 1.0001))
    fig, axes = new_figure(12, 0.8 + 3.4 * len(scaled), len(scaled), 2)
    mappable = None
    for row, run in zip(axes, scaled):
        for ax, branch in zip(row, ("attn", "mlp")):
            _, mesh = plot_scale_heatmap(run, branch, ax=ax, norm=norm)
            mappable = mappable or mesh
    bar = fig.colorbar(mappable, ax=axes.ravel().tolist(), label="mean |γ| over the branch's channels (log scale)",
                       shrink=0.9 if len(scaled) > 1 else 1.0)
    readable_log_ticks(bar.ax.yaxis)
    left_out = [run.name for run in runs if all(run is not other for other in scaled)]
    if left_out:
        fig_title += f"  (not shown, no learnable scale: {', '.join(left_out)})"
    fig.suptitle(fig_title, fontsize=13, fontweight="bold")
    return fig


def _has_scales(run: RunData) -> bool:
    return any(isinstance((b.get(branch) or {}).get("scale_mean"), (int, float)) for r in run.diagnostics[:1]
               for b in r["blocks"] for branch in ("attn", "mlp"))


def figure_ratio_vs_depth(runs: RunData | Sequence[RunData]):
    """Branch-to-stream ratio against depth for both branches at the early / mid / late moments."""
    runs = _runs(runs)
    colors = run_colors(len(runs))
    fig, axes = new_figure(12, 5.0, 1, 2, sharey=True)
    for ax, branch in zip(axes[0], ("attn", "mlp")):
        plot_ratio_vs_depth(runs, branch, ax=ax, colors=colors)
    run_legend(fig, runs, colors, _moment_styles(runs), title="colour: run; line style: moment of training")
    fig.suptitle("How much each branch adds to the residual stream", fontsize=13, fontweight="bold")
    return fig


def figure_signal_vs_depth(runs: RunData | Sequence[RunData]):
    """Stream RMS, gradient norm and update-to-weight ratio against depth at the early / mid / late moments."""
    runs = _runs(runs)
    colors = run_colors(len(runs))
    fig, axes = new_figure(12.5, 5.0, 1, 3)
    for ax, stat in zip(axes[0], ("stream_rms", "grad_norm", "update_ratio")):
        plot_block_stat_vs_depth(runs, stat, ax=ax, colors=colors)
    run_legend(fig, runs, colors, _moment_styles(runs), title="colour: run; line style: moment of training")
    fig.suptitle("Signal through depth: forward (stream), backward (gradients), updates",
                 fontsize=13, fontweight="bold")
    return fig
