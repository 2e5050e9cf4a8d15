"""Figures to paste into a paper, as SVG and PDF (vector; matplotlib through :mod:`layerscale.diagnostics.plots`).

* :func:`figure_criterion_removal` — one criterion's removal curve: the loss change ``Δ(n)`` after removing ``n``
  blocks by it, with its bootstrap band and the tolerance δ;
* :func:`figure_angular_heatmap` — the layer × n angular-distance heatmap of Gromov et al. 2024 (arXiv 2403.17887,
  who plot their angular distance against the start ``ℓ`` and the span ``n``): ``d(x^(ℓ), x^(ℓ+n))`` on the
  token the head reads, for every start ``ℓ`` and span ``n``, with the argmin ``ℓ*(n)`` of each ``n`` marked (the span ``gromov`` removes);
* :func:`vector_bytes` — a figure as SVG or PDF bytes, without the creation date, so the same figure gives the
  same file.
"""

from __future__ import annotations

import io
import math
from typing import Sequence

from ...diagnostics import plots

__all__ = ["figure_angular_heatmap", "figure_criterion_removal", "vector_bytes", "VECTOR_FORMATS"]

VECTOR_FORMATS = ("svg", "pdf")
_NO_DATE = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}


def vector_bytes(figure, kind: str) -> bytes:
    """``figure`` rendered as ``kind`` (``"svg"`` or ``"pdf"``) bytes, without a date in its metadata."""
    if kind not in VECTOR_FORMATS:
        raise ValueError(f"figure format must be one of {', '.join(VECTOR_FORMATS)}, got {kind!r}")
    buffer = io.BytesIO()
    if kind == "svg":
        import matplotlib

        with matplotlib.rc_context({"svg.hashsalt": "layerscale"}):  # stable element ids
            figure.savefig(buffer, format=kind, metadata=_NO_DATE[kind])
    else:
        figure.savefig(buffer, format=kind, metadata=_NO_DATE[kind])
    return buffer.getvalue()


def figure_criterion_removal(criterion: str, delta: Sequence[float], interval: Sequence[Sequence[float]] | None,
                             depth: int, level: float, tolerance: float | None = None,
                             what: str = "blocks removed"):
    """``Δ(n)`` against ``n = 1 …`` for one criterion, its ``level`` band and the δ line (when given)."""
    fig, axes = plots.new_figure(4.2, 3.0)
    ax = axes[0, 0]
    ns = list(range(1, len(delta) + 1))
    ax.plot(ns, delta, marker="o", ms=3, color="tab:blue", label=criterion)
    if interval is not None:
        ax.fill_between(ns, [b[0] for b in interval], [b[1] for b in interval], alpha=0.25, color="tab:blue", lw=0,
                        label=f"{level:.0%} interval")
    ax.axhline(0, color="k", lw=0.8)
    if tolerance is not None:
        ax.axhline(tolerance, color="k", ls="--", lw=1, label=f"δ = {tolerance:g} nats")
    ax.set_xlabel(f"{what} (n of {depth})")
    ax.set_ylabel("Δ loss (removed − full, nats)")
    ax.set_title(criterion, fontsize=10)
    ax.legend(fontsize=7)
    return fig


def figure_angular_heatmap(distance: Sequence[Sequence[float]], readout: str):
    """The heatmap ``H[n, ℓ] = d(x^(ℓ), x^(ℓ+n))`` (``distance[ℓ][ℓ + n]``, ``(L + 1) × (L + 1)``) for ``ℓ = 0 …
    L − n`` (x axis: the first block removed, 1-based ``ℓ + 1``) and ``n = 1 … L`` (y axis), with ``ℓ*(n)`` marked."""
    depth = len(distance) - 1
    if depth < 1 or any(len(row) != depth + 1 for row in distance):
        raise ValueError(f"the angular-distance heatmap needs an (L+1) x (L+1) matrix with L >= 1, got "
                         f"{len(distance)} rows")
    grid = [[math.nan] * depth for _ in range(depth)]
    best_x, best_y = [], []
    for n in range(1, depth + 1):
        row = [distance[start][start + n] for start in range(depth - n + 1)]
        for start, value in enumerate(row):
            grid[n - 1][start] = value
        best = min(range(len(row)), key=lambda i: (row[i], i))
        best_x.append(best + 1)
        best_y.append(n)
    fig, axes = plots.new_figure(5.0, 4.2)
    ax = axes[0, 0]
    image = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto", vmin=0.0,
                      extent=(0.5, depth + 0.5, 0.5, depth + 0.5))
    fig.colorbar(image, ax=ax, label=f"angular distance d(x^(ℓ), x^(ℓ+n)), readout {readout}")
    ax.plot(best_x, best_y, "o", ms=3, mfc="none", mec="tab:red", label="ℓ*(n): the span gromov removes")
    ax.set_xlabel("first block removed, ℓ + 1")
    ax.set_ylabel("blocks removed, n")
    ax.legend(fontsize=7, loc="upper right")
    return fig
