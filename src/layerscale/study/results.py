"""Collecting a study's runs into tables: per run, and per (method, depth) as mean ± std over seeds.

Per run: final and best evaluation accuracy, final evaluation loss, whether it diverged and at which step, and the
wall time (seconds of training, carried across resumes). A diverged run counts in the table with the accuracy of
its last evaluation before it stopped (none: empty) and is flagged; means are over the runs that have a value.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from ..atomic_io import write_text_atomic
from ..train.metrics_log import METRICS_FILE, read_metrics
from .grid import RunSpec
from .worker import STATUS_FILE

__all__ = ["RunResult", "GroupResult", "collect_run", "group_results", "write_tables"]


@dataclass(frozen=True)
class RunResult:
    run_id: str
    method: str
    depth: int
    seed: int
    status: str                  # finished | diverged | pending
    final_accuracy: float | None
    best_accuracy: float | None
    final_loss: float | None
    diverged_step: int | None
    steps: int
    wall_time_s: float | None


@dataclass(frozen=True)
class GroupResult:
    method: str
    depth: int
    runs: int
    diverged: int
    final_accuracy_mean: float | None
    final_accuracy_std: float | None
    best_accuracy_mean: float | None
    best_accuracy_std: float | None
    final_loss_mean: float | None
    first_diverged_step: int | None
    wall_time_s_mean: float | None


def _number(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def collect_run(spec: RunSpec, run_dir: Path) -> RunResult:
    """Read one run directory (possibly unfinished) into a :class:`RunResult`."""
    status_path = run_dir / STATUS_FILE
    status = json.loads(status_path.read_text(encoding="utf-8")) if status_path.is_file() else {"status": "pending"}
    records = read_metrics(run_dir / METRICS_FILE)
    evals = [r for r in records if r.get("split") == "eval"]
    accuracies = [a for a in (_number(r.get("accuracy")) for r in evals) if a is not None]
    return RunResult(
        run_id=spec.run_id, method=spec.method, depth=spec.depth, seed=spec.seed, status=status["status"],
        final_accuracy=_number(evals[-1].get("accuracy")) if evals else None,
        best_accuracy=max(accuracies) if accuracies else None,
        final_loss=_number(evals[-1].get("loss")) if evals else None,
        diverged_step=status.get("diverged_step"),
        steps=max((int(r.get("step", 0)) for r in records), default=0),
        wall_time_s=_number(records[-1].get("time")) if records else None,
    )


def _mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    return statistics.fmean(present), (statistics.stdev(present) if len(present) > 1 else 0.0)


def group_results(results: list[RunResult]) -> list[GroupResult]:
    """Aggregate over seeds, keeping the grid's (depth, method) order."""
    groups: dict[tuple[str, int], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.method, r.depth), []).append(r)
    out = []
    for (method, depth), rs in groups.items():
        fa = _mean_std([r.final_accuracy for r in rs])
        ba = _mean_std([r.best_accuracy for r in rs])
        steps = [r.diverged_step for r in rs if r.status == "diverged" and r.diverged_step is not None]
        out.append(GroupResult(
            method=method, depth=depth, runs=len(rs), diverged=sum(r.status == "diverged" for r in rs),
            final_accuracy_mean=fa[0], final_accuracy_std=fa[1], best_accuracy_mean=ba[0], best_accuracy_std=ba[1],
            final_loss_mean=_mean_std([r.final_loss for r in rs])[0],
            first_diverged_step=min(steps) if steps else None,
            wall_time_s_mean=_mean_std([r.wall_time_s for r in rs])[0],
        ))
    return out


def _pm(mean: float | None, std: float | None, scale: float = 100.0) -> str:
    if mean is None:
        return "—"
    return f"{mean * scale:.1f} ± {std * scale:.1f}"


def markdown_table(groups: list[GroupResult]) -> str:
    """The results table as Markdown (accuracy in %)."""
    lines = ["| method | depth | runs | final acc (%) | best acc (%) | final loss | diverged (first step) | "
             "wall time (s) |", "|---|---:|---:|---:|---:|---:|---|---:|"]
    for g in groups:
        diverged = f"{g.diverged}/{g.runs}" + (f" (step {g.first_diverged_step})" if g.first_diverged_step else "")
        loss = "—" if g.final_loss_mean is None else f"{g.final_loss_mean:.3f}"
        wall = "—" if g.wall_time_s_mean is None else f"{g.wall_time_s_mean:.0f}"
        lines.append(f"| {g.method} | {g.depth} | {g.runs} | {_pm(g.final_accuracy_mean, g.final_accuracy_std)} | "
                     f"{_pm(g.best_accuracy_mean, g.best_accuracy_std)} | {loss} | {diverged} | {wall} |")
    return "\n".join(lines) + "\n"


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_tables(study_dir: Path, results: list[RunResult]) -> dict[str, Path]:
    """Write ``runs.csv`` (one row per run), ``results.csv`` and ``results.md`` (per method and depth)."""
    groups = group_results(results)
    paths = {"runs_csv": study_dir / "runs.csv", "results_csv": study_dir / "results.csv",
             "results_md": study_dir / "results.md"}
    write_text_atomic(paths["runs_csv"], _csv([asdict(r) for r in results]))
    write_text_atomic(paths["results_csv"], _csv([asdict(g) for g in groups]))
    write_text_atomic(paths["results_md"], markdown_table(groups))
    return paths
