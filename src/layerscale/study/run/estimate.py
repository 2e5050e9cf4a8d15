"""``layerscale study --estimate``: how long the study's remaining runs will take on this machine, from a few timed
steps of every cell's model, before committing hours to it.

Each (method, depth) cell's model is built and trained exactly as its runs would be (the run's config, data, model,
optimizer and precision, through :class:`~layerscale.train.loop.trainer.Trainer`, on the run's ``run.device``) for a few
optimizer steps on one batch, and one evaluation batch is timed under ``inference_mode``, with the run's thread
count. It times this machine: for runs sent to a cluster, run it there. A run's time is then

    steps × step + evaluations × batches per evaluation × eval batch + (final runs) test batches × eval batch

with the evaluations at the trainer's points (every ``run.eval_every_steps``, at each epoch's end, at the run's
last step). Already trained steps (``study_status.json``) are not counted, nor, with ``--reuse-from``, the runs that
:func:`~layerscale.study.run.reuse.reusable_runs` finds reusable in the earlier study. Not counted: start-up, checkpoints, the
diagnostics monitor, and early stopping, which can only shorten runs — an upper bound on an idle machine.

Which tuning runs continue past rung 0 and which learning rate each cell chooses depend on the tuning scores: the
later rungs are counted by their sizes (``⌈n / η⌉`` rates per cell), and the final runs at a tuned rate that is not
yet known are given as a range (the tuned rate equal to the shared one, or not). Nothing is written.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ...untrusted_files import read_json_file
from ..design.grid import StudySpec, format_lr
from .tuning import rung_steps
from .worker import read_status

__all__ = ["CellCost", "RunShape", "estimate_study", "estimate_text", "run_seconds", "time_cells"]


@dataclass(frozen=True)
class CellCost:
    """Measured wall seconds of one cell's optimizer step and of one evaluation batch (its runs' batch sizes)."""

    step: float
    eval_batch: float


@dataclass(frozen=True)
class RunShape:
    """What a run's time depends on besides the cell: the trainer's evaluation points and batch counts."""

    total_steps: int
    steps_per_epoch: int
    eval_every: int
    eval_batches: int  # batches per periodic evaluation (the validation split's, or ``run.eval_batches`` of them)
    test_batches: int  # batches of the one test pass of a final run (0: none)
    #: batches of the evaluation at the last step, which reads the whole split (``None``: ``eval_batches``)
    final_eval_batches: int | None = None


def _evaluations(start: int, stop: int, shape: RunShape) -> int:
    """How many evaluations the trainer runs on the steps ``start + 1 .. stop`` of a run that pauses (or ends) at
    ``stop``: every ``eval_every`` steps, at each epoch's end, and at ``stop`` itself."""
    if stop <= start:
        return 0

    def up_to(step: int) -> int:
        count = step // shape.steps_per_epoch
        if shape.eval_every:
            lcm = math.lcm(shape.eval_every, shape.steps_per_epoch)
            count += step // shape.eval_every - step // lcm
        return count

    at_stop = stop % shape.steps_per_epoch == 0 or (shape.eval_every and stop % shape.eval_every == 0)
    return up_to(stop) - up_to(start) + (0 if at_stop else 1)


def run_seconds(cost: CellCost, shape: RunShape, start: int, stop: int, final: bool) -> float:
    """Seconds to train a run from step ``start`` to ``stop`` (see the module docstring); a final run reaching the
    full budget adds its test pass."""
    if stop <= start:
        return 0.0
    seconds = (stop - start) * cost.step + _evaluations(start, stop, shape) * shape.eval_batches * cost.eval_batch
    if stop >= shape.total_steps and shape.final_eval_batches is not None:  # the last one reads the whole split
        seconds += (shape.final_eval_batches - shape.eval_batches) * cost.eval_batch
    if final and stop >= shape.total_steps:
        seconds += shape.test_batches * cost.eval_batch
    return seconds


def _trained_steps(run_dir: Path, reused: frozenset = frozenset()) -> float:
    """Steps the run has trained (``inf`` when it needs no more: finished, diverged or stopped early, or reused
    from an earlier study: its id in ``reused``)."""
    if run_dir.name in reused:
        return math.inf
    status = read_status(run_dir) or {}
    if status.get("status") not in (None, "paused"):
        return math.inf
    return int(status.get("step") or 0)


def time_cells(spec: StudySpec, study_dir: Path, threads: int, steps: int = 3) -> tuple[dict, RunShape]:
    """``({(method, depth): CellCost}, RunShape)``: every cell's step and evaluation batch timed on this machine with
    ``threads`` threads (after one warm-up step), and the runs' evaluation shape."""
    import torch

    from ...models.registry import create_model
    from ...train.config.schema import TrainConfig
    from ...train.setup.data_setup import load_train_data
    from ...train.distributed import wrap_model
    from ...train.runner import distributed_run
    from ...train.loop.trainer import Trainer

    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    costs, shape, data = {}, None, None
    try:
        for method, depth in spec.cells():
            cfg = TrainConfig.from_dict(spec.run(study_dir, method, depth, spec.shared_lr, spec.seeds[0],
                                                 "final").config)
            data = data or load_train_data(cfg)
            with distributed_run(cfg) as ctx, tempfile.TemporaryDirectory() as scratch:
                torch.manual_seed(cfg.run.seed)
                model = create_model(cfg.model.name, **{**data.model_args, **cfg.model.options}).to(ctx.device)
                trainer = Trainer(cfg, wrap_model(model, ctx, cfg.run.strategy), data, ctx, Path(scratch))
                x, y = (t.to(ctx.device) for t in next(iter(trainer.train_loader)))
                trainer._train_step(x, y)  # warm-up: first-call allocations and kernel choices
                _synchronize(ctx.device)
                start = time.perf_counter()
                for _ in range(steps):
                    trainer._train_step(x, y)
                _synchronize(ctx.device)
                step = (time.perf_counter() - start) / steps
                eval_batch = _time_eval_batch(trainer, ctx.device)
                if shape is None:
                    shape = _run_shape(trainer, cfg)
            costs[(method, depth)] = CellCost(step, eval_batch)
    finally:
        torch.set_num_threads(threads_before)
    return costs, shape


def _synchronize(device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously: a timer must not stop before it ends)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_eval_batch(trainer, device) -> float:
    import torch

    if trainer.eval_loader is None:
        return 0.0
    x, _ = next(iter(trainer.eval_loader))
    x = x.to(device)
    trainer.model.eval()
    with torch.inference_mode(), trainer._amp():
        trainer.model(x)  # warm-up
        _synchronize(device)
        start = time.perf_counter()
        trainer.model(x)
        _synchronize(device)
        seconds = time.perf_counter() - start
    trainer.model.train()
    return seconds


def _run_shape(trainer, cfg) -> RunShape:
    whole = len(trainer.eval_loader) if trainer.eval_loader is not None else 0
    batches = min(whole, cfg.run.eval_batches) if cfg.run.eval_batches else whole
    return RunShape(trainer.total_steps, trainer.steps_per_epoch, cfg.run.eval_every_steps, batches,
                    len(trainer.test_loader) if trainer.test_loader is not None else 0, whole)


def _known_choices(study_dir: Path) -> dict[tuple[str, int], float]:
    try:
        from .rate_search import TUNING_FILE

        cells = read_json_file(study_dir / TUNING_FILE, expected=object, finite=False)["cells"]
        return {(c["method"], int(c["depth"])): float(c["chosen_lr"]) for c in cells if c.get("chosen_lr")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # unreadable or malformed: no choice known
        return {}


def _hours(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


def _tuning_left(spec: StudySpec, study_dir: Path, costs: dict, shape: RunShape,
                 reused: frozenset = frozenset()) -> tuple[int, float, list[int]]:
    """``(run segments, seconds, rung steps)`` of the tuning still to train. Per cell, rung ``i`` continues the
    ``⌈n / η^i⌉`` furthest-trained runs (a rung keeps the best ones, which then ran furthest)."""
    segments, seconds = 0, 0.0
    if spec.tuned and spec.tuning == "grid":  # every rate's final runs are the tuning (grid extensions not counted)
        for method, depth in spec.cells():
            for lr in spec.lrs:
                if lr == spec.shared_lr and spec.shared_table:
                    continue  # counted with the final runs at the shared rate
                for seed in spec.seeds:
                    done = _trained_steps(spec.run(study_dir, method, depth, lr, seed, "final").run_dir, reused)
                    left = run_seconds(costs[(method, depth)], shape, min(done, shape.total_steps),
                                       shape.total_steps, final=True)
                    segments += left > 0
                    seconds += left
        return segments, seconds, [shape.total_steps]
    rungs = rung_steps(shape.total_steps, len(spec.lrs), spec.min_budget, spec.halving_rate) if spec.tuned else []
    for method, depth in spec.cells():
        for seed in spec.tuning_seeds:
            size, previous = len(spec.lrs), 0
            trained = sorted((_trained_steps(spec.run(study_dir, method, depth, lr, seed, "tune").run_dir)
                              for lr in spec.lrs), reverse=True)
            for stop in rungs:
                for done in trained[:size]:
                    left = run_seconds(costs[(method, depth)], shape, max(previous, min(done, stop)), stop,
                                       final=False)
                    segments += left > 0
                    seconds += left
                size, previous = math.ceil(size / spec.halving_rate), stop
    return segments, seconds, rungs


def _finals_left(spec: StudySpec, study_dir: Path, costs: dict, shape: RunShape,
                 reused: frozenset = frozenset()) -> tuple[int, int, float, float]:
    """``(runs low, runs high, seconds low, seconds high)`` of the final runs still to train: a cell whose tuned rate
    is not known yet adds its seeds at that rate to the high end only (the rate may equal the shared one); under grid
    tuning those runs are already counted as tuning."""
    chosen = _known_choices(study_dir)
    runs, extra_runs, seconds, extra_seconds = 0, 0, 0.0, 0.0
    for method, depth in spec.cells():
        cost = costs[(method, depth)]
        tuned = chosen.get((method, depth), spec.shared_lr if not spec.tuned or len(spec.lrs) == 1 else None)
        rates = {spec.shared_lr} if spec.shared_table or not spec.tuned else set()
        rates |= {tuned} if tuned is not None else set()
        for lr in rates:
            for seed in spec.seeds:
                done = _trained_steps(spec.run(study_dir, method, depth, lr, seed, "final").run_dir, reused)
                left = run_seconds(cost, shape, min(done, shape.total_steps), shape.total_steps, final=True)
                runs += left > 0
                seconds += left
        if tuned is None and not (spec.tuned and spec.tuning == "grid"):  # a grid's every rate is in the tuning
            whole = len(spec.seeds) * run_seconds(cost, shape, 0, shape.total_steps, final=True)
            if spec.shared_table:  # maybe the shared rate itself: no more runs
                extra_runs, extra_seconds = extra_runs + len(spec.seeds), extra_seconds + whole
            else:
                runs, seconds = runs + len(spec.seeds), seconds + whole
    return runs, runs + extra_runs, seconds, seconds + extra_seconds


def estimate_text(spec: StudySpec, study_dir: Path, costs: dict, shape: RunShape, jobs: int, threads: int,
                  reused: frozenset = frozenset(), reuse_from: Path | None = None) -> str:
    """The estimate as printed: per cell its step, evaluation batch and full-run time; then the remaining tuning and
    final runs, their summed time and the wall time with ``jobs`` runs at a time. ``reused``: the ids of the runs
    an earlier study (``reuse_from``) gives, counted as done."""
    lines = [f"estimate for the study in {study_dir} on this machine ({threads} thread(s) per run, wall clock, "
             "timed now: other load inflates it; early stopping can only shorten runs; not counted: a few seconds "
             "of start-up per run, checkpoints, diagnostics)",
             f"runs: {shape.total_steps} steps, evaluation every {shape.eval_every or shape.steps_per_epoch} steps "
             f"on {shape.eval_batches} batch(es), test pass {shape.test_batches} batch(es) per final run", "",
             "| method | depth | step | eval batch | full final run |", "|---|---:|---:|---:|---:|"]
    for (method, depth), cost in costs.items():
        lines.append(f"| {method} | {depth} | {cost.step * 1e3:.0f} ms | {cost.eval_batch * 1e3:.0f} ms | "
                     f"{_hours(run_seconds(cost, shape, 0, shape.total_steps, final=True))} |")
    tuning_runs, tuning_seconds, rungs = _tuning_left(spec, study_dir, costs, shape, reused)
    runs_low, runs_high, final_low, final_high = _finals_left(spec, study_dir, costs, shape, reused)
    final_text = (f"{runs_low} run(s), {_hours(final_low)}" if runs_low == runs_high and final_low == final_high
                  else f"{runs_low}–{runs_high} run(s) (depending on the tuned rates), "
                       f"{_hours(final_low)}–{_hours(final_high)}")
    total_low, total_high = tuning_seconds + final_low, tuning_seconds + final_high
    wall = (_hours(total_low / jobs) if total_low == total_high
            else f"{_hours(total_low / jobs)}–{_hours(total_high / jobs)}")
    lines.append("")
    if reuse_from is not None:
        lines.append(f"reused from {reuse_from}: {len(reused)} finished run(s), counted as done")
    lines += [f"remaining tuning: {tuning_runs} run segment(s), {_hours(tuning_seconds)}"
              + (f" (rungs to steps {', '.join(map(str, rungs))}; shared rate {format_lr(spec.shared_lr)})"
                 if rungs else ""),
              f"remaining final runs: {final_text}",
              f"remaining in all: {wall} of wall time with {jobs} run(s) at a time"]
    return "\n".join(lines)


def estimate_study(spec: StudySpec, study_dir: str | Path, jobs: int | None = None, threads: int | None = None,
                   reuse_from: str | Path | None = None) -> str:
    """Check the study as a run would (:func:`~layerscale.study.design.plan.plan_study`, nothing written), time every
    cell and return :func:`estimate_text`; with ``reuse_from``, the runs that study would give are counted as done
    (:func:`~layerscale.study.run.reuse.reusable_runs`)."""
    from .executor import resolve_parallelism
    from ..design.plan import plan_study

    jobs, threads = resolve_parallelism(jobs, threads)
    study_dir = Path(study_dir)
    plan_study(spec, study_dir)
    reused = frozenset()
    if reuse_from is not None:
        from .reuse import reusable_runs

        reuse_from = Path(reuse_from)
        reused = frozenset(reusable_runs(spec, study_dir, reuse_from))
    costs, shape = time_cells(spec, study_dir, threads)
    return estimate_text(spec, study_dir, costs, shape, jobs, threads, reused, reuse_from)
