"""How the new blocks of a grown model come alive: their ``mean|γ|`` against the optimizer step, beside the source
blocks'.

``layerscale grow`` inserts blocks with γ = G (default 0) on both branches (CaiT, Touvron et al. 2021, eq. 1:
``x ← x + γ ⊙ F(LN(x))``), so a grown model starts as exactly its source's function, and training decides how far
each new block switches on. The records mark those blocks (``"new": true``, written by the trainer's monitor for a
model loaded with ``run.init_from`` from a folder ``layerscale grow`` wrote); this figure draws, per branch, the
mean of ``mean|γ|`` over the new blocks with their range (lowest to highest block) and the mean over the source
blocks, on a linear scale (the new blocks start at exactly 0, which a log scale cannot show).
"""

from __future__ import annotations

import math
from typing import Sequence

from .plots import BRANCH_TITLES, NEW_BLOCK_COLOR, new_figure, require_matplotlib
from .run_data import RunData

__all__ = ["grown_runs", "plot_new_block_scales", "figure_new_block_scales"]


def grown_runs(runs: RunData | Sequence[RunData]) -> list[RunData]:
    """The runs whose records mark new blocks and whose blocks have a learnable scale."""
    runs = [runs] if isinstance(runs, RunData) else list(runs)
    return [run for run in runs if run.new_blocks and _scale_series(run, "attn", run.new_blocks)[0]]


def _scale_series(run: RunData, branch: str, blocks: Sequence[int]) -> tuple[list[float], list[list[float]]]:
    """Steps and, per step, the finite ``mean|γ|`` values of ``branch`` in ``blocks`` (1-based); steps where none
    of them has a value are left out."""
    steps, values = [], []
    for record in run.diagnostics:
        entries = record["blocks"]
        found = [(entries[i - 1].get(branch) or {}).get("scale_mean") for i in blocks if i <= len(entries)]
        found = [float(v) for v in found if isinstance(v, (int, float)) and math.isfinite(v)]
        if found:
            steps.append(float(record["step"]))
            values.append(found)
    return steps, values


def plot_new_block_scales(run: RunData, branch: str = "attn", ax=None):
    """One panel: ``mean|γ|`` of ``branch`` over training, the new blocks' mean and range and the source blocks'
    mean. Returns the figure."""
    require_matplotlib()
    ax = ax if ax is not None else new_figure(6.4, 4.0)[1][0, 0]
    ax.set_title(f"{run.label}\n{BRANCH_TITLES.get(branch, branch)}", fontsize=10)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean |γ| over the branch's channels")
    new = run.new_blocks
    source = [i for i in range(1, len(run.diagnostics[0]["blocks"]) + 1) if i not in set(new)] if new else []
    steps, values = _scale_series(run, branch, new)
    if not steps:
        ax.text(0.5, 0.5, "no new block with a learnable scale on this branch", ha="center", va="center",
                transform=ax.transAxes, fontsize=9, color="0.4")
        return ax.figure
    ax.fill_between(steps, [min(v) for v in values], [max(v) for v in values], color=NEW_BLOCK_COLOR, alpha=0.2,
                    lw=0, label=f"new blocks ({len(new)}): lowest to highest")
    ax.plot(steps, [sum(v) / len(v) for v in values], color=NEW_BLOCK_COLOR, lw=1.8, label="new blocks: mean")
    old_steps, old_values = _scale_series(run, branch, source)
    if old_steps:
        ax.plot(old_steps, [sum(v) / len(v) for v in old_values], color="0.35", ls="--", lw=1.4,
                label=f"source blocks ({len(source)}): mean")
    ax.set_ylim(bottom=0.0)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8, loc="best")
    return ax.figure


def figure_new_block_scales(runs: RunData | Sequence[RunData]):
    """The new blocks' γ against the source blocks', both branches, one row per grown run (``None`` when no run
    has new blocks)."""
    grown = grown_runs(runs)
    if not grown:
        return None
    fig, axes = new_figure(12, 0.8 + 3.4 * len(grown), len(grown), 2)
    for row, run in zip(axes, grown):
        for ax, branch in zip(row, ("attn", "mlp")):
            plot_new_block_scales(run, branch, ax=ax)
    fig.suptitle("New blocks of a grown model: |γ| during training", fontsize=13, fontweight="bold")
    return fig
