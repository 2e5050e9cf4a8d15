"""The files a paper takes from a depth analysis or a criterion comparison, written beside ``analysis.html``.

For a :class:`~layerscale.analysis.result.DepthAnalysis` (:func:`analysis_paper_files`):

* ``depth_summary.md`` / ``.tex`` and ``depth_blocks.md`` / ``.tex`` (:mod:`~layerscale.analysis.outputs.paper_tables`);
* ``angular_heatmap.svg`` / ``.pdf``: the layer × n angular-distance heatmap (Gromov et al. 2024);
* ``removal_<criterion>.svg`` / ``.pdf``: one removal curve per criterion with its band — the criteria compared
  (``result.criteria``), else the analysis's own removal curve (``gromov``'s spans, or ``best_span`` with
  ``spans="exhaustive"``);
* with a comparison, ``criteria.md`` / ``.tex`` and ``criteria.json``.

For a :class:`~layerscale.analysis.pruning.criterion_comparison.CriterionComparison` alone (``layerscale prune``):
:func:`comparison_paper_files` — ``criteria.md`` / ``.tex``, ``criteria.json`` (the comparison itself at full
precision, :meth:`CriterionComparison.to_dict`, for a paper's own plots), ``removal_<criterion>.svg`` / ``.pdf``
and the heatmap. Everything is rendered in memory first; :func:`write_files` then writes each file atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...atomic_io import write_bytes_atomic
from ..pruning.criterion_comparison import CriterionComparison
from .paper_figures import VECTOR_FORMATS, figure_angular_heatmap, figure_criterion_removal, vector_bytes
from .paper_tables import blocks_table, criteria_table, summary_table
from ..result import DepthAnalysis

__all__ = ["analysis_paper_files", "comparison_paper_files", "write_files"]


def _figure_files(stem: str, figure) -> dict[str, bytes]:
    return {f"{stem}.{kind}": vector_bytes(figure, kind) for kind in VECTOR_FORMATS}


def _table_files(stem: str, tables: tuple[str, str]) -> dict[str, bytes]:
    markdown, latex = tables
    return {f"{stem}.md": markdown.encode("utf-8"), f"{stem}.tex": latex.encode("utf-8")}


def comparison_paper_files(comparison: CriterionComparison, tolerance: float | None = None) -> dict[str, bytes]:
    """``{file name: bytes}`` for a criterion comparison (module docstring)."""
    files = _table_files("criteria", criteria_table(comparison, tolerance))
    files["criteria.json"] = (json.dumps(comparison.to_dict(), indent=1, allow_nan=False) + "\n").encode("utf-8")
    for name, curve in comparison.curves.items():
        files.update(_figure_files(f"removal_{name}", figure_criterion_removal(
            name, curve.delta_loss, curve.delta_loss_interval, comparison.depth, comparison.level, tolerance)))
    files.update(_figure_files("angular_heatmap", figure_angular_heatmap(comparison.distance, comparison.readout)))
    return files


def analysis_paper_files(result: DepthAnalysis) -> dict[str, bytes]:
    """``{file name: bytes}`` for a depth analysis (module docstring)."""
    tolerance = result.summary.tolerance
    files = _table_files("depth_summary", summary_table(result))
    files.update(_table_files("depth_blocks", blocks_table(result)))
    if result.criteria:
        files.update(comparison_paper_files(CriterionComparison.from_dict(result.criteria), tolerance))
    else:
        name = "gromov" if result.summary.span_selection == "angular" else "best_span"
        files.update(_figure_files(f"removal_{name}", figure_criterion_removal(
            name, result.removal_delta_loss, result.interval("removal_delta_loss"), result.depth,
            result.summary.level, tolerance, "blocks removed, one contiguous span")))
    if result.head_distance:
        files.update(_figure_files("angular_heatmap", figure_angular_heatmap(result.head_distance,
                                                                               result.readout)))
    return files


def write_files(out: str | os.PathLike, files: dict[str, bytes]) -> list[Path]:
    """Write every file of ``files`` into the folder ``out`` (created), each atomically; returns the paths."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    return [write_bytes_atomic(folder / name, data) for name, data in files.items()]
