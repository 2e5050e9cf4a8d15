"""From run directories to the study's tables: one row per run, one row per (table, method, depth) cell.

Per run (``runs.csv``): status, the test metric (one evaluation of the test split when the run ends), the
validation metric (last and best), steps trained, whether early stopping ended it, the first step whose validation
metric reached the target, training seconds, and from its training-loss records the loss spikes (Lightning's rule,
:func:`layerscale.stats.stability.loss_spikes`) and whether any loss was not finite. Per cell (``results.csv``):
the mean of the test metric over seeds with its 95 % t-interval, and the paired difference against the reference
method at the same depth (seed by seed, same table) with its interval (:mod:`layerscale.stats.intervals`). Two
tables: ``tuned`` (each cell at its own tuned learning rate) and ``shared`` (every cell at the study's one learning
rate).

The test metric is accuracy in % for classifiers and bits per byte (test loss / ln 2; the GPT is byte-level) for
language models. A diverged run has no test metric: it is counted in ``diverged`` and left out of the mean.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from ...atomic_io import write_text_atomic
from ...train.records.metrics_log import METRICS_FILE, read_metrics
from ..design.grid import RunSpec, StudySpec
from ..design.metric import Metric, finite_number as _number
from .contrasts import Contrast
from ...stats.intervals import Interval, mean_interval, paired_interval, within_range
from ...stats.stability import loss_spikes
from .verdicts import verdict
from ..run.worker import read_status

__all__ = ["Metric", "RunResult", "CellResult", "collect_run", "cell_results", "results_rows", "train_losses",
           "verdict", "write_tables"]


@dataclass(frozen=True)
class RunResult:
    run_id: str
    kind: str                    # tune | final
    method: str
    depth: int
    lr: float
    seed: int
    status: str                  # finished | paused | diverged | pending | failed
    test: float | None           # the test metric (final runs)
    val_last: float | None       # validation metric of the last evaluation
    val_best: float | None
    steps: int
    stopped_early: bool
    steps_to_target: int | None
    diverged_step: int | None
    wall_time_s: float | None
    loss_spikes: int = 0         # training-loss records that are spikes (docs/study.md, "Stability")
    nonfinite_loss: bool = False  # a training-loss record that is not finite


@dataclass(frozen=True)
class CellResult:
    table: str                   # tuned | shared
    method: str
    depth: int
    lr: float | None             # None: the cell's tuning is not finished
    runs: int
    diverged: int
    test: Interval | None
    diff: Interval | None        # method − reference, paired by seed (None for the reference itself)
    steps_to_target: Interval | None
    reached_target: int
    val_best: Interval | None
    wall_time_s: float | None
    params: int | None = None    # the cell's model's parameter count
    ended: int = 0               # runs that have ended (finished or diverged): steps-to-target counts only these
    seeds: tuple[int, ...] = ()  # the seeds of test.values (and diff.values), in order
    family: str = ""             # primary | exploratory (layerscale.study.report.verdicts); "" for the reference
    p_raw: float | None = None   # two-sided t-test p-value of diff
    p_adj: float | None = None   # Holm (primary) or Benjamini–Hochberg (exploratory) adjusted
    bootstrap: tuple[float, float] | None = None  # two-level bootstrap interval of diff (primary family)
    #: the table of another row with exactly these runs (the shared row of a cell whose method and reference both
    #: chose the shared rate repeats the tuned row): its verdict is that row's, and it is not counted again
    same_runs_as: str = ""


def collect_run(spec: RunSpec, metric: Metric, target: float | None = None) -> RunResult:
    """Read one run directory (possibly unfinished) into a :class:`RunResult`."""
    status = read_status(spec.run_dir) or {"status": "pending"}
    records = read_metrics(spec.run_dir / METRICS_FILE)
    evals = [r for r in records if r.get("split") == "eval"]
    # The test metric: the run's one test evaluation; a run without a validation split evaluated the test split
    # all along ("on": "test"), and its last evaluation is the test metric.
    tests = [r for r in records if r.get("split") == "test"] or [r for r in evals if r.get("on", "test") == "test"]
    values = [(int(r.get("step", 0)), metric.from_record(r)) for r in evals]
    present = [v for _, v in values if v is not None]
    best = (max if metric.higher_is_better else min)(present) if present else None
    reach = None
    if target is not None:
        reach = next((step for step, v in values if v is not None and metric.reached(v, target)), None)
    losses = train_losses(records)
    return RunResult(
        run_id=spec.run_id, kind=spec.kind, method=spec.method, depth=spec.depth, lr=spec.lr, seed=spec.seed,
        status=status.get("status", "pending"), test=metric.from_record(tests[-1]) if tests else None,
        val_last=values[-1][1] if values else None, val_best=best,
        steps=max((int(r.get("step", 0)) for r in records), default=0),
        stopped_early=any(r.get("event") == "early_stop" for r in records), steps_to_target=reach,
        diverged_step=status.get("diverged_step"),
        wall_time_s=_number(records[-1].get("time")) if records else None,
        loss_spikes=len(loss_spikes(losses)), nonfinite_loss=not all(math.isfinite(v) for v in losses),
    )


def train_losses(records: list[dict]) -> list[float]:
    """The training-loss series of a run's records (one per logging interval); a loss the log wrote as text
    (``"nan"``, ``"inf"``: JSON has no such numbers) or not as a number is not finite."""
    out = []
    for record in records:
        if record.get("split") == "train" and "loss" in record:
            value = record["loss"]
            try:
                out.append(float(value) if not isinstance(value, bool) else math.nan)
            except (TypeError, ValueError, OverflowError):
                out.append(math.nan)
    return out


def cell_results(spec: StudySpec, results: list[RunResult], chosen: dict[tuple[str, int], float],
                 params: dict[tuple[str, int], int] | None = None, metric: Metric | None = None) -> list[CellResult]:
    """The cells of both tables (``tuned`` first), in the grid's order, from the final runs; ``params``: each
    cell's parameter count (from the study's plan); ``metric``: truncates the intervals to its range (default:
    accuracy's, as the study's metric is inferred when not given)."""
    metric = metric or Metric.for_language_model(False)
    finals = {(r.method, r.depth, r.lr, r.seed): r for r in results if r.kind == "final"}
    tables = [("tuned", lambda m, d: chosen.get((m, d), spec.shared_lr))]
    if spec.shared_table:
        tables.append(("shared", lambda m, d: spec.shared_lr))
    out = []
    for table, rate in tables:
        for method, depth in spec.cells():
            lr = rate(method, depth)
            cell_seeds = spec.seeds_for(method, depth)
            rs = [finals[(method, depth, lr, s)] for s in cell_seeds if (method, depth, lr, s) in finals]
            by_seed = {r.seed: r.test for r in rs if r.test is not None}
            ref_lr = rate(spec.reference_method, depth)
            reference = {s: finals[(spec.reference_method, depth, ref_lr, s)].test for s in cell_seeds
                         if (spec.reference_method, depth, ref_lr, s) in finals
                         and finals[(spec.reference_method, depth, ref_lr, s)].test is not None}
            seeds = tuple(s for s in cell_seeds if s in by_seed)
            ended = [r for r in rs if r.status in ("finished", "diverged")]
            reached = [r.steps_to_target for r in ended if r.steps_to_target is not None]
            walls = [r.wall_time_s for r in rs if r.wall_time_s is not None]
            out.append(CellResult(
                table=table, method=method, depth=depth, lr=lr, runs=len(rs),
                diverged=sum(r.status == "diverged" for r in rs),
                test=within_range(mean_interval([by_seed[s] for s in seeds]), *metric.value_range),
                diff=None if method == spec.reference_method else
                within_range(paired_interval(by_seed, reference), *metric.difference_range),
                steps_to_target=mean_interval(reached), reached_target=len(reached),
                val_best=within_range(mean_interval([r.val_best for r in rs if r.val_best is not None]),
                                      *metric.value_range),
                wall_time_s=sum(walls) / len(walls) if walls else None,
                params=(params or {}).get((method, depth)), ended=len(ended), seeds=seeds,
            ))
    return out


def _flat_interval(prefix: str, interval: Interval | None) -> dict:
    if interval is None:
        return {f"{prefix}_mean": None, f"{prefix}_ci_low": None, f"{prefix}_ci_high": None, f"{prefix}_n": 0}
    return {f"{prefix}_mean": interval.mean, f"{prefix}_ci_low": interval.low, f"{prefix}_ci_high": interval.high,
            f"{prefix}_n": interval.n}


def _per_seed(seeds: tuple[int, ...], interval: Interval | None) -> str:
    """``0:86.1;1:85.9;2:86.4``: every seed's value, as the interval was computed from them."""
    if interval is None or len(interval.values) != len(seeds):
        return ""
    return ";".join(f"{s}:{v!r}" for s, v in zip(seeds, interval.values))


def results_rows(cells: list[CellResult], metric: Metric, contrasts: list[Contrast] = ()) -> list[dict]:
    """One row per cell of each table (``tuned``, ``shared``), then one per across-depth contrast (``table``:
    ``depth_gain`` or ``interaction``, from ``depth_from`` to ``depth``; its value in the ``diff_*`` columns).
    ``verdict`` is by the adjusted p-value of the row's family; ``verdict_unadjusted`` by its interval alone."""
    rows = []
    for c in cells:
        row = {"table": c.table, "method": c.method, "depth_from": "", "depth": c.depth, "params": c.params,
               "lr": c.lr, "runs": c.runs, "diverged": c.diverged, "metric": metric.name}
        row.update(_flat_interval("test", c.test))
        row["test_truncated"] = c.test.truncated if c.test else ""
        row["test_per_seed"] = _per_seed(c.seeds, c.test)
        row.update(_comparison_columns(c.diff, c.family, c.p_raw, c.p_adj, metric))
        row["diff_per_seed"] = _diff_seeds(c)
        row["bootstrap_low"], row["bootstrap_high"] = c.bootstrap or ("", "")
        row["same_runs_as"] = c.same_runs_as
        row.update(_flat_interval("steps_to_target", c.steps_to_target))
        row["reached_target"] = c.reached_target
        row.update(_flat_interval("val_best", c.val_best))
        row["wall_time_s_mean"] = c.wall_time_s
        rows.append(row)
    keys = list(rows[0]) if rows else []
    for k in contrasts:
        row = dict.fromkeys(keys, "")
        row.update({"table": k.kind, "method": k.method, "depth_from": k.depth_from, "depth": k.depth,
                    "metric": metric.name})
        row.update(_comparison_columns(k.diff, k.family, k.p_raw, k.p_adj, metric))
        rows.append(row)
    return rows


def _diff_seeds(c: CellResult) -> str:
    if c.diff is None or not c.diff.values:
        return ""
    return ";".join(f"{v!r}" for v in c.diff.values)


def _comparison_columns(diff: Interval | None, family: str, p_raw, p_adj, metric: Metric) -> dict:
    columns = _flat_interval("diff", diff)
    columns["diff_truncated"] = diff.truncated if diff else ""
    columns.update(family=family, p_raw="" if p_raw is None else p_raw, p_adj="" if p_adj is None else p_adj,
                   adjustment={"primary": "holm", "exploratory": "bh"}.get(family, ""),
                   verdict=verdict(diff, metric.higher_is_better, p_adj),
                   verdict_unadjusted=verdict(diff, metric.higher_is_better))
    return columns


def _csv(rows: list[dict]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_tables(study_dir: Path, results: list[RunResult], cells: list[CellResult], metric: Metric,
                 markdown: str, contrasts: list[Contrast] = (), stability: list[dict] | None = None) -> dict[str, Path]:
    """Write ``runs.csv`` (one row per run, tuning runs included), ``results.csv`` (one row per cell),
    ``results.md`` (``markdown``: the tables and the generated summary) and, given its rows, ``stability.csv``
    (one row per cell, :mod:`layerscale.study.report.stability_table`)."""
    from ..run.csv_rows import csv_text
    from .stability_table import FIELDS, STABILITY_FILE

    paths = {"runs_csv": study_dir / "runs.csv", "results_csv": study_dir / "results.csv",
             "results_md": study_dir / "results.md"}
    write_text_atomic(paths["runs_csv"], _csv([asdict(r) for r in results]))
    write_text_atomic(paths["results_csv"], _csv(results_rows(cells, metric, contrasts)))
    write_text_atomic(paths["results_md"], markdown)
    if stability is not None:
        paths["stability_csv"] = study_dir / STABILITY_FILE
        write_text_atomic(paths["stability_csv"], csv_text(stability, FIELDS))
    return paths
