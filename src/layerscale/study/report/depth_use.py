"""``layerscale study --analyze``: the DepthBench question on the user's own data — how many of its blocks does
each final model use?

After the final runs, every finished run of the tuned table is analysed with :func:`layerscale.analysis.analyze_run`
(its analysis is kept in ``RUN_DIR/analysis/`` and reused on a rerun). The **effective depth** ``D_δ`` of a model
is the fewest blocks left after removing the best contiguous span whose removal keeps the evaluation loss within δ
nats of the full model's (docs/analysis.md; :func:`layerscale.analysis.effective_depth`). Each cell reports the mean
``D_δ`` over seeds with its 95 % t-interval (each seed's value below 3 seeds), beside its nominal depth. An analysis
saved by an earlier version (``analysis.json`` format 1) is computed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..design.grid import RunSpec, StudySpec
from ...stats.intervals import Interval, mean_interval
from .results import RunResult
from .formatting import format_interval

__all__ = ["EffectiveDepth", "analyze_final_runs", "effective_depth_markdown"]

ANALYSIS_DIR = "analysis"


@dataclass(frozen=True)
class EffectiveDepth:
    method: str
    depth: int
    effective: Interval | None
    runs: int


def _analysis_of(run_dir: Path):
    from ...analysis import DepthAnalysis, analyze_run

    saved = run_dir / ANALYSIS_DIR / "analysis.json"
    if saved.is_file():
        try:
            return DepthAnalysis.read_json(saved)
        except ValueError:  # an analysis of an earlier format: computed again below
            pass
    result = analyze_run(run_dir)
    result.write(run_dir / ANALYSIS_DIR)
    return result


def analyze_final_runs(spec: StudySpec, finals: list[RunSpec], results: list[RunResult],
                       chosen: dict[tuple[str, int], float | None], log=print) -> list[EffectiveDepth]:
    """Analyse every finished final run at its cell's tuned rate; one :class:`EffectiveDepth` per cell."""
    from ...analysis import effective_depth

    status = {(r.method, r.depth, r.lr, r.seed): r.status for r in results if r.kind == "final"}
    by_cell: dict[tuple[str, int], list[int]] = {cell: [] for cell in spec.cells()}
    for run in finals:
        if run.lr != chosen.get((run.method, run.depth)) or status.get(
                (run.method, run.depth, run.lr, run.seed)) != "finished":
            continue
        try:
            by_cell[(run.method, run.depth)].append(effective_depth(_analysis_of(run.run_dir)))
        except ValueError as exc:  # a model the analysis cannot read (e.g. multi-stream residuals): say so, go on
            log(f"analysis of {run.run_id} skipped: {exc}")
    return [EffectiveDepth(m, d, mean_interval(values), len(values)) for (m, d), values in by_cell.items()]


def effective_depth_markdown(spec: StudySpec, rows: list[EffectiveDepth]) -> str:
    """The table "effective depth against nominal depth, per method"."""
    lines = ["## Effective depth against nominal depth", "",
             "D_δ: the fewest blocks left after removing the best contiguous span of blocks while the evaluation "
             "loss stays within δ nats of the full model's (docs/analysis.md), mean over the analysed seeds "
             "[95 % interval], of the final runs at each method's tuned learning rate.", "",
             "| method | " + " | ".join(f"depth {d}" for d in spec.depths) + " |",
             "|---|" + "---:|" * len(spec.depths)]
    by_cell = {(r.method, r.depth): r for r in rows}
    for method in spec.methods:
        cells = []
        for depth in spec.depths:
            row = by_cell.get((method, depth))
            cells.append("—" if row is None or row.effective is None else
                         f"{format_interval(row.effective, 1)} of {depth}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
