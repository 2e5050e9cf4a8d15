"""Figures of a depth analysis and its self-contained HTML page (``analysis.html``), in ``layerscale report``'s style.

Figures (matplotlib through :mod:`layerscale.diagnostics.plots`, no pyplot state), each with its bootstrap intervals
(error bars or shaded bands): block-ablation bars, the contiguous n-block removal curve, early exit (logit lens)
against the number of blocks kept, angular distance (token the head reads, and all tokens), Block Influence and
relative update against depth, linear-probe accuracy against depth with the embedding baseline, the CKA heatmap;
and, for several analyses (a study), effective depth against nominal depth per residual method with intervals
(:func:`figure_effective_depth`).
"""

from __future__ import annotations

import base64
import html
import time
from collections import defaultdict
from typing import Sequence

from ...diagnostics import plots
from ...diagnostics.html_parts import REPORT_CSS, figure_png_bytes
from ...diagnostics.report import ReportSection
from .paper_figures import figure_angular_heatmap
from ..result import DepthAnalysis, effective_depth_interval

__all__ = ["analysis_sections", "analysis_page", "figure_ablation", "figure_removal", "figure_early_exit",
           "figure_geometry", "figure_probes", "figure_cka", "figure_effective_depth"]

_POINT_LABELS = {"block_out": "block output", "attn_out": "attention-branch output", "mlp_out": "MLP-branch output",
                 "norm2_in": "input of the second norm"}


def _blocks(result: DepthAnalysis) -> list[int]:
    return list(range(1, result.depth + 1))


def _errors(result: DepthAnalysis, name: str, values: Sequence[float], offset: int = 0):
    """``yerr`` for matplotlib (distances below and above each value) from the interval of ``name``, or None."""
    bounds = result.intervals.get(name)
    if bounds is None:
        return None
    bounds = bounds[offset:offset + len(values)]
    return [[max(0.0, v - lo) for v, (lo, _) in zip(values, bounds)],
            [max(0.0, hi - v) for v, (_, hi) in zip(values, bounds)]]


def _band(ax, result: DepthAnalysis, name: str, xs: Sequence[int], color: str | None = None) -> None:
    bounds = result.intervals.get(name)
    if bounds is not None:
        ax.fill_between(xs, [b[0] for b in bounds], [b[1] for b in bounds], alpha=0.2, color=color, lw=0)


def _level(result: DepthAnalysis) -> str:
    return f"{result.summary.level:.0%}"


def figure_ablation(result: DepthAnalysis):
    """Two panels: loss change and accuracy change when each block is replaced by the identity, with intervals."""
    fig, axes = plots.new_figure(10, 3.6, 1, 2)
    blocks = _blocks(result)
    needed = set(result.summary.needed_alone_blocks)
    colors = ["tab:red" if b in needed else "tab:gray" for b in blocks]
    ax = axes[0, 0]
    ax.bar(blocks, result.ablation_delta_loss, color=colors,
           yerr=_errors(result, "ablation_delta_loss", result.ablation_delta_loss), ecolor="k", capsize=1.5)
    ax.axhline(result.summary.tolerance, color="k", ls="--", lw=1, label=f"δ = {result.summary.tolerance:g} nats")
    ax.set_xlabel("ablated block")
    ax.set_ylabel("Δ loss (ablated − full)")
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    ax.bar(blocks, result.ablation_delta_accuracy, color=colors,
           yerr=_errors(result, "ablation_delta_accuracy", result.ablation_delta_accuracy), ecolor="k", capsize=1.5)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("ablated block")
    ax.set_ylabel("Δ accuracy (ablated − full)")
    return fig


def figure_removal(result: DepthAnalysis):
    """The contiguous n-block removal curve: Δ loss and Δ accuracy after removing the chosen span of n blocks."""
    fig, axes = plots.new_figure(10, 3.6, 1, 2)
    ns = _blocks(result)
    for ax, values, name, label in ((axes[0, 0], result.removal_delta_loss, "removal_delta_loss", "Δ loss"),
                                    (axes[0, 1], result.removal_delta_accuracy, "removal_delta_accuracy",
                                     "Δ accuracy")):
        ax.plot(ns, values, marker="o", ms=3)
        _band(ax, result, name, ns)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("blocks removed (n, one contiguous span)")
        ax.set_ylabel(f"{label} (removed − full)")
    ax = axes[0, 0]
    ax.axhline(result.summary.tolerance, color="k", ls="--", lw=1, label=f"δ = {result.summary.tolerance:g} nats")
    removable = result.depth - result.summary.effective_depth
    if removable:
        ax.axvline(removable, color="tab:red", ls=":", lw=1, label=f"effective depth {result.summary.effective_depth}")
    ax.legend(fontsize=8)
    return fig


def figure_early_exit(result: DepthAnalysis):
    """Loss and accuracy keeping only the first ``k`` blocks (then the final norm and head), ``k = 0 … L``."""
    fig, axes = plots.new_figure(10, 3.6, 1, 2)
    keep = list(range(result.depth + 1))
    for ax, values, name, full, label in (
            (axes[0, 0], result.early_exit_loss, "early_exit_loss", result.clean_loss, "loss"),
            (axes[0, 1], result.early_exit_accuracy, "early_exit_accuracy", result.clean_accuracy, "accuracy")):
        ax.plot(keep, values, marker="o", ms=3)
        _band(ax, result, name, keep)
        ax.axhline(full, color="k", ls=":", lw=1, label="full model")
        ax.axvline(result.summary.exit_depth, color="tab:red", ls="--", lw=1, label="within δ")
        ax.set_xlabel("blocks kept (k)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    return fig


def figure_geometry(result: DepthAnalysis):
    """Angular distance (token the head reads and all tokens, with the near-identity threshold), Block Influence,
    and relative update norm of each block."""
    fig, axes = plots.new_figure(10, 3.6, 1, 2)
    blocks = _blocks(result)
    ax = axes[0, 0]
    for name, label in (("angular_distance", f"angular distance (readout {result.readout})"),
                        ("angular_distance_all_tokens", "angular distance (all tokens)"),
                        ("block_influence", "Block Influence (1 − mean cos)")):
        ax.plot(blocks, getattr(result, name), marker="o", ms=3, label=label)
        _band(ax, result, name, blocks)
    ax.axhline(result.summary.near_identity, color="k", ls="--", lw=1, label="near-identity threshold")
    ax.set_xlabel("block")
    ax.set_ylabel("in → out")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    ax.plot(blocks, result.relative_update, marker="o", ms=3, color="tab:green")
    _band(ax, result, "relative_update", blocks, "tab:green")
    if min(result.relative_update, default=0) > 0:
        ax.set_yscale("log")
        plots.readable_log_ticks(ax.yaxis)
    ax.set_xlabel("block")
    ax.set_ylabel("‖x_out − x_in‖ / ‖x_in‖")
    return fig


def figure_probes(result: DepthAnalysis):
    """Held-out linear-probe accuracy against depth, one line per observation point and pooling, with the
    embedding (x⁰) baseline of each pooling as a horizontal line."""
    fig, axes = plots.new_figure(7, 4.0)
    ax = axes[0, 0]
    blocks = _blocks(result)
    for point, curve in sorted(result.probe_accuracy.items()):
        where, pooling = point.split("/")
        style = "-" if where == "block_out" else "--"
        line, = ax.plot(blocks, curve, style, marker="o", ms=2.5,
                        label=f"{_POINT_LABELS.get(where, where)} ({pooling})")
        if where == "block_out":
            _band(ax, result, f"probe/{point}", blocks, line.get_color())
    for pooling, value in sorted(result.probe_embedding.items()):
        ax.axhline(value, color="0.4", ls=":", lw=1, label=f"embedding x⁰ ({pooling})")
    for point, curve in sorted(result.probe_selectivity.items()):
        if not point.startswith("embedding/"):
            ax.plot(blocks, curve, "-.", lw=1, label=f"selectivity, task − control ({point.split('/')[1]})")
    ax.set_xlabel("block")
    ax.set_ylabel("probe accuracy (held out)")
    if result.summary.probe_saturation_depth is not None:
        ax.axvline(result.summary.probe_saturation_depth, color="tab:red", ls=":", lw=1)
    ax.legend(fontsize=7)
    return fig


def figure_criteria(result: DepthAnalysis):
    """The loss change after removing n blocks by each criterion compared (``result.criteria``), with bands."""
    from ..pruning.criterion_comparison import CriterionComparison

    comparison = CriterionComparison.from_dict(result.criteria)
    fig, axes = plots.new_figure(7, 4.0)
    ax = axes[0, 0]
    for color, (name, curve) in zip(plots.run_colors(len(comparison.curves)), comparison.curves.items()):
        ns = list(range(1, len(curve.delta_loss) + 1))
        ax.plot(ns, curve.delta_loss, marker="o", ms=2.5, color=color, label=name)
        ax.fill_between(ns, [b[0] for b in curve.delta_loss_interval], [b[1] for b in curve.delta_loss_interval],
                        color=color, alpha=0.2, lw=0)
    ax.axhline(result.summary.tolerance, color="k", ls="--", lw=1, label=f"δ = {result.summary.tolerance:g} nats")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("blocks removed (n)")
    ax.set_ylabel("Δ loss (removed − full, nats)")
    ax.legend(fontsize=7)
    return fig


def figure_cka(result: DepthAnalysis):
    """The L × L CKA heatmap (linear or debiased) between block outputs."""
    fig, axes = plots.new_figure(5.2, 4.4)
    ax = axes[0, 0]
    image = ax.imshow(result.cka, vmin=0, vmax=1, cmap="viridis", origin="lower",
                      extent=(0.5, result.depth + 0.5, 0.5, result.depth + 0.5))
    fig.colorbar(image, ax=ax, label=f"{result.cka_kind} CKA")
    ax.set_xlabel("block")
    ax.set_ylabel("block")
    return fig


def figure_effective_depth(results: Sequence[DepthAnalysis], labels: Sequence[str] | None = None):
    """Effective depth against nominal depth, one line per residual method (or per ``labels`` entry), with the
    diagonal ``effective = nominal`` for reference. Several analyses at one (method, depth) are averaged; the
    error bars span the lowest to the highest bound of their bootstrap intervals."""
    grouped: dict[str, dict[int, list[tuple[int, float, float]]]] = defaultdict(lambda: defaultdict(list))
    for i, result in enumerate(results):
        label = labels[i] if labels is not None else (result.residual or result.model)
        grouped[label][result.depth].append(effective_depth_interval(result))
    fig, axes = plots.new_figure(6.4, 4.2)
    ax = axes[0, 0]
    depths = sorted({r.depth for r in results})
    colors = plots.run_colors(max(1, len(grouped)))
    for color, (label, by_depth) in zip(colors, sorted(grouped.items())):
        xs = sorted(by_depth)
        means = [sum(v for v, _, _ in by_depth[d]) / len(by_depth[d]) for d in xs]
        lows = [min(lo for _, lo, _ in by_depth[d]) for d in xs]
        highs = [max(hi for _, _, hi in by_depth[d]) for d in xs]
        ax.errorbar(xs, means, yerr=[[max(0.0, m - lo) for m, lo in zip(means, lows)],
                                     [max(0.0, hi - m) for m, hi in zip(means, highs)]],
                    marker="o", color=color, capsize=3, label=label)
    if depths:
        ax.plot([0, max(depths)], [0, max(depths)], color="0.6", ls=":", lw=1, label="effective = nominal")
    ax.set_xlabel("nominal depth (blocks)")
    ax.set_ylabel("effective depth D_δ (blocks)")
    ax.legend(fontsize=8)
    return fig


def analysis_sections(result: DepthAnalysis) -> list[ReportSection]:
    """The page's sections, each a figure with a paragraph on how to read it."""
    level = _level(result)
    exit_title = "Logit lens (early exit)" if result.task == "language_model" else "Early exit"
    sections = [
        ReportSection("Contiguous n-block removal", figure_removal(result),
                      "Change of the evaluation loss (left) and accuracy (right) after removing one contiguous span "
                      "of n blocks ("
                      + ("the gromov criterion: Gromov et al.'s smallest angular distance between the span's input "
                         "and output" if result.summary.span_selection == "angular" else "the best of every span")
                      + f"), with {level} bootstrap bands. The effective depth D_δ is L minus the largest n whose "
                      f"removal stays within δ (dashed)"
                      + (f"; its set variant, removing any blocks, is {result.summary.set_depth} "
                         f"({result.summary.set_search} search)" if result.summary.set_depth is not None else "")
                      + ".", name="removal"),
        ReportSection("Block ablation", figure_ablation(result),
                      f"Change of the evaluation loss (left) and accuracy (right) when one block is replaced by the "
                      f"identity (x_out = x_in) and everything else is kept, with {level} bootstrap error bars. Red "
                      "bars are blocks the model needs alone (loss rises by more than δ, dashed); this misses what "
                      "blocks do together, which the removal curve above measures.", name="ablation"),
        ReportSection(exit_title, figure_early_exit(result),
                      f"Loss and accuracy when only the first k blocks are kept and their stream goes straight to "
                      f"the final norm and head ({level} bands). Where the curve meets the full model's line "
                      "(dotted) the extra blocks stop adding anything the head can read.", name="early_exit"),
        ReportSection("Angular distance, Block Influence and relative update", figure_geometry(result),
                      f"Left: angle between the stream entering and leaving each block divided by π, on the token "
                      f"the head reads ({result.readout}; Gromov et al. 2024) and averaged over all tokens, and "
                      f"ShortGPT's Block Influence, with {level} bands; blocks under the dashed line barely turn the "
                      "stream (near-identity). Right: the size of each block's whole update relative to the stream "
                      "it is added to.", name="geometry"),
    ]
    if result.head_distance:
        sections.append(ReportSection(
            "Angular distance between depths (Gromov et al.)", figure_angular_heatmap(result.head_distance,
                                                                                    result.readout),
            f"Mean angular distance d(x^(ℓ), x^(ℓ+n)) between the stream entering block ℓ + 1 and the stream n "
            f"blocks later, on the token the head reads ({result.readout}), for every start and span length; the "
            "circles mark the start of the span the gromov criterion removes for each n. Dark runs are spans that "
            "barely turn the stream.", name="angular_heatmap"))
    if result.criteria:
        sections.append(ReportSection(
            "Pruning criteria compared", figure_criteria(result),
            f"Change of the evaluation loss after removing n blocks chosen by each criterion (gromov: Gromov et "
            f"al.'s contiguous span; block_influence: ShortGPT's lowest Block Influence; angular: the lowest "
            f"single-block angular distance; ablation: the cheapest single ablations; gamma: the smallest "
            f"γ-scaled branches), with {level} bootstrap bands; the table is criteria.md / criteria.tex.",
            name="criteria"))
    if result.probe_accuracy:
        sections.append(ReportSection(
            "Linear probes against depth", figure_probes(result),
            f"Held-out accuracy of a ridge classifier trained on pooled features at each block, the mean over "
            f"{result.settings.get('probe_splits', 1)} splits, with {level} bands over splits and examples (solid: "
            "block output; dashed: module points inside the block; dotted: the embedding x⁰, the baseline any "
            "block must beat; dash-dotted: selectivity, the block-output accuracy minus that on a control task "
            "of random labels tied to input clusters, Hewitt & Liang 2019). The red line marks the "
            "probe-saturation depth.", name="probes"))
    sections.append(ReportSection(
        f"Representation similarity ({result.cka_kind} CKA)", figure_cka(result),
        f"{result.cka_kind.capitalize()} CKA between the outputs of every pair of blocks "
        f"({result.cka_representation}). Bright squares along the diagonal are runs of blocks whose representations "
        "barely change; a uniformly bright late region means the late blocks repeat each other.", name="cka"))
    return sections


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else html.escape(str(value))


def analysis_page(result: DepthAnalysis, title: str | None = None, dpi: int = 100) -> str:
    """The HTML page of ``result`` as a string (figures embedded as base64 PNG)."""
    title = title or f"Depth analysis: {result.model}" + (f" ({result.residual})" if result.residual else "")
    facts = [("model", result.model), ("residual method", result.residual or "–"), ("task", result.task),
             ("blocks", result.depth), ("evaluation examples", result.num_examples),
             ("full-model loss", result.clean_loss), ("full-model accuracy", result.clean_accuracy),
             ("source", result.source or "–")]
    facts += [(f"setting: {k}", v) for k, v in result.settings.items()]
    table = "".join(f"<tr><th>{html.escape(k)}</th><td>{_fmt(v)}</td></tr>" for k, v in facts)
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in result.summary.lines)
    parts = []
    for section in analysis_sections(result):
        data = figure_png_bytes(section.figure, dpi)
        encoded = base64.b64encode(data).decode("ascii")
        parts.append(f"<h2>{html.escape(section.title)}</h2>\n<p>{html.escape(section.text)}</p>\n"
                     f'<img alt="{html.escape(section.title)}" src="data:image/png;base64,{encoded}">')
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{REPORT_CSS}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="meta">Generated {time.strftime('%Y-%m-%d %H:%M')} by <code>layerscale analyze</code>. Every number is in
<code>analysis.json</code>; one row per block in <code>analysis.csv</code>.</p>
<h2>Summary</h2>
<ul>{summary}</ul>
<table>{table}</table>
{''.join(parts)}
</body></html>
"""
