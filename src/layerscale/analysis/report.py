"""Figures of a depth analysis and its self-contained HTML page (``analysis.html``), in ``layerscale report``'s style.

Figures (matplotlib through :mod:`layerscale.diagnostics.plots`, no pyplot state): block-ablation bars, early exit
(logit lens) against the number of blocks kept, angular distance and relative update against depth, linear-probe
accuracy against depth, the CKA heatmap; and, for several analyses (a study), effective depth against nominal depth
per residual method (:func:`figure_effective_depth`).
"""

from __future__ import annotations

import base64
import html
import time
from collections import defaultdict
from typing import Sequence

from ..diagnostics import plots
from ..diagnostics.html_parts import REPORT_CSS, figure_png_bytes
from ..diagnostics.report import ReportSection
from .result import DepthAnalysis

__all__ = ["analysis_sections", "analysis_page", "figure_ablation", "figure_early_exit", "figure_geometry",
           "figure_probes", "figure_cka", "figure_effective_depth"]

_POINT_LABELS = {"block_out": "block output", "attn_out": "attention-branch output", "mlp_out": "MLP-branch output",
                 "norm2_in": "input of the second norm"}


def _blocks(result: DepthAnalysis) -> list[int]:
    return list(range(1, result.depth + 1))


def figure_ablation(result: DepthAnalysis):
    """Two panels: loss change and accuracy change when each block is replaced by the identity."""
    fig, axes = plots.new_figure(10, 3.6, 1, 2)
    blocks = _blocks(result)
    effective = set(result.summary.effective_blocks)
    colors = ["tab:red" if b in effective else "tab:gray" for b in blocks]
    ax = axes[0, 0]
    ax.bar(blocks, result.ablation_delta_loss, color=colors)
    ax.axhline(result.summary.loss_threshold * abs(result.clean_loss), color="k", ls="--", lw=1,
               label=f"threshold: {result.summary.loss_threshold:.0%} of the loss")
    ax.set_xlabel("ablated block")
    ax.set_ylabel("Δ loss (ablated − full)")
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    ax.bar(blocks, result.ablation_delta_accuracy, color=colors)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("ablated block")
    ax.set_ylabel("Δ accuracy (ablated − full)")
    return fig


def figure_early_exit(result: DepthAnalysis):
    """Loss and accuracy keeping only the first ``k`` blocks (then the final norm and head), ``k = 0 … L``."""
    fig, axes = plots.new_figure(10, 3.6, 1, 2)
    keep = list(range(result.depth + 1))
    for ax, values, full, label in ((axes[0, 0], result.early_exit_loss, result.clean_loss, "loss"),
                                    (axes[0, 1], result.early_exit_accuracy, result.clean_accuracy, "accuracy")):
        ax.plot(keep, values, marker="o", ms=3)
        ax.axhline(full, color="k", ls=":", lw=1, label="full model")
        if result.summary.exit_saturation_depth is not None:
            ax.axvline(result.summary.exit_saturation_depth, color="tab:red", ls="--", lw=1, label="saturation")
        ax.set_xlabel("blocks kept (k)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    return fig


def figure_geometry(result: DepthAnalysis):
    """Angular distance (with the near-identity threshold) and relative update norm of each block."""
    fig, axes = plots.new_figure(10, 3.6, 1, 2)
    blocks = _blocks(result)
    ax = axes[0, 0]
    ax.plot(blocks, result.angular_distance, marker="o", ms=3)
    ax.axhline(result.summary.near_identity, color="k", ls="--", lw=1, label="near-identity threshold")
    ax.set_xlabel("block")
    ax.set_ylabel("angular distance in → out (1 = opposite)")
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    ax.plot(blocks, result.relative_update, marker="o", ms=3, color="tab:green")
    if min(result.relative_update, default=0) > 0:
        ax.set_yscale("log")
        plots.readable_log_ticks(ax.yaxis)
    ax.set_xlabel("block")
    ax.set_ylabel("‖x_out − x_in‖ / ‖x_in‖")
    return fig


def figure_probes(result: DepthAnalysis):
    """Held-out linear-probe accuracy against depth, one line per observation point and pooling."""
    fig, axes = plots.new_figure(7, 4.0)
    ax = axes[0, 0]
    blocks = _blocks(result)
    for point, curve in sorted(result.probe_accuracy.items()):
        where, pooling = point.split("/")
        style = "-" if where == "block_out" else "--"
        ax.plot(blocks, curve, style, marker="o", ms=2.5, label=f"{_POINT_LABELS.get(where, where)} ({pooling})")
    ax.set_xlabel("block")
    ax.set_ylabel("probe accuracy (held out)")
    if result.summary.probe_saturation_depth is not None:
        ax.axvline(result.summary.probe_saturation_depth, color="tab:red", ls=":", lw=1)
    ax.legend(fontsize=7)
    return fig


def figure_cka(result: DepthAnalysis):
    """The L × L linear-CKA heatmap between block outputs."""
    fig, axes = plots.new_figure(5.2, 4.4)
    ax = axes[0, 0]
    image = ax.imshow(result.cka, vmin=0, vmax=1, cmap="viridis", origin="lower",
                      extent=(0.5, result.depth + 0.5, 0.5, result.depth + 0.5))
    fig.colorbar(image, ax=ax, label="linear CKA")
    ax.set_xlabel("block")
    ax.set_ylabel("block")
    return fig


def figure_effective_depth(results: Sequence[DepthAnalysis], labels: Sequence[str] | None = None):
    """Effective depth against nominal depth, one line per residual method (or per ``labels`` entry), with the
    diagonal ``effective = nominal`` for reference. Several analyses at one (method, depth) are averaged."""
    grouped: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, result in enumerate(results):
        label = labels[i] if labels is not None else (result.residual or result.model)
        grouped[label][result.depth].append(result.summary.effective_depth)
    fig, axes = plots.new_figure(6.4, 4.2)
    ax = axes[0, 0]
    depths = sorted({r.depth for r in results})
    colors = plots.run_colors(max(1, len(grouped)))
    for color, (label, by_depth) in zip(colors, sorted(grouped.items())):
        xs = sorted(by_depth)
        ax.plot(xs, [sum(by_depth[d]) / len(by_depth[d]) for d in xs], marker="o", color=color, label=label)
    if depths:
        ax.plot([0, max(depths)], [0, max(depths)], color="0.6", ls=":", lw=1, label="effective = nominal")
    ax.set_xlabel("nominal depth (blocks)")
    ax.set_ylabel("effective depth (blocks)")
    ax.legend(fontsize=8)
    return fig


def analysis_sections(result: DepthAnalysis) -> list[ReportSection]:
    """The page's sections, each a figure with a paragraph on how to read it."""
    lens = "logit lens" if result.task == "language_model" else "early exit"
    sections = [
        ReportSection("Block ablation", figure_ablation(result),
                      "Change of the evaluation loss (left) and accuracy (right) when one block is replaced by the "
                      "identity (x_out = x_in) and everything else is kept. Red bars are the blocks that count towards "
                      "the effective depth (loss rises by more than the dashed threshold); grey bars are blocks the "
                      "model can lose.", name="ablation"),
        ReportSection(f"Early exit ({lens})", figure_early_exit(result),
                      "Loss and accuracy when only the first k blocks are kept and their stream goes straight to "
                      "the final norm and head. Where the curve meets the full model's line (dotted) the extra "
                      "blocks stop adding anything the head can read.", name="early_exit"),
        ReportSection("Angular distance and relative update", figure_geometry(result),
                      "Left: mean angle between the stream entering and leaving each block, divided by π; blocks "
                      "under the dashed line barely turn the stream (near-identity). Right: the size of each "
                      "block's whole update relative to the stream it is added to.", name="geometry"),
    ]
    if result.probe_accuracy:
        sections.append(ReportSection(
            "Linear probes against depth", figure_probes(result),
            "Held-out accuracy of a ridge classifier trained on pooled features at each block (solid: block "
            "output; dashed: module points inside the block). The red line marks the probe-saturation depth; "
            "a curve that peaks before the last block means the best features are not at the top.", name="probes"))
    sections.append(ReportSection(
        "Representation similarity (linear CKA)", figure_cka(result),
        f"Linear CKA between the outputs of every pair of blocks ({result.cka_representation}). Bright squares "
        "along the diagonal are runs of blocks whose representations barely change; a uniformly bright late "
        "region means the late blocks repeat each other.", name="cka"))
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
