"""The part of a training run shared by a config-built model (:func:`layerscale.train.run`) and a user's model
(:mod:`layerscale.train.user_model`): the run directory, resuming, determinism, the process group, and
:func:`train_built_model` (from a built, checked model to a finished run directory). The run directory's layout is
described in :mod:`layerscale.train.runner`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..atomic_io import write_text_atomic
from ..destinations import check_writable_dir
from ..paths import describe_non_file, refuse_non_file
from .loop.auto_policy import choose_compile
from .loop.budget import planned_total_steps, steps_per_epoch
from .callbacks import Callback
from .records.environment import run_environment
from .state.checkpoint import (
    CHECKPOINT_DIR,
    MODEL_FILE,
    STATE_FILE,
    latest_checkpoint,
    remove_stale_temporaries,
)
from .config.schema import TrainConfig
from .setup.data_setup import TrainData
from .setup.initial_weights import freeze_for_config
from .state.failed_start import BAD_INPUT_ERRORS, FailedStart
from .state.finite_check import check_resume_finite
from .distributed import (
    DistContext,
    barrier,
    broadcast_object,
    setup_distributed,
    teardown_distributed,
    wrap_model,
)
from .records.metrics_log import METRICS_FILE, TENSORBOARD_DIR, MetricsLog, truncate_metrics
from .state.run_lock import RunDirectoryInUse, hold_run_dir, is_empty_run_dir
from .records.run_summary import early_stop_on_test_warning, warmup_warning, workers_resume_warning
from .state.train_state import check_position
from .state.train_state_fit import check_state_fits
from .loop.trainer import Trainer

__all__ = ["CONFIG_FILE", "SUMMARY_FILE", "TrainResult", "distributed_run", "train_built_model",
           "with_config_monitor"]

CONFIG_FILE = "config.yaml"
SUMMARY_FILE = "summary.json"
_EXTRA = "pip install 'torch-layerscale[train]'"


@dataclass(frozen=True)
class TrainResult:
    """What a finished run returns: its directory, optimizer steps done, completed epochs, the last evaluation
    record (``loss``, ``accuracy``, ``perplexity`` for text, ``samples``, ``on`` the split it read: ``validation``
    or ``test``), the last checkpoint directory, and ``test``: the record of the one test evaluation of a run with a
    validation split (empty without one, or before the run's end)."""

    run_dir: Path
    step: int
    epoch: int
    metrics: dict[str, Any]
    checkpoint: Path | None
    test: dict[str, Any] = field(default_factory=dict)


def _resolve_resume(resume: str | os.PathLike) -> tuple[Path, Path | None]:
    """``(run_dir, checkpoint_dir)`` for ``--resume`` given a run directory (latest checkpoint) or a checkpoint.

    A run directory with its ``config.yaml`` but no checkpoint yet (the run was stopped before its first one) gives
    ``checkpoint_dir`` ``None``: the run starts again from step 0 in its own directory, with its own config."""
    path = Path(resume)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path}: is {describe_non_file(path) or 'a file'}; --resume takes a run directory or one "
                         "of its checkpoint directories")
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: run directory to resume not found")
    if (path / MODEL_FILE).is_file() and path.parent.name == CHECKPOINT_DIR:
        return path.parent.parent, path
    refuse_non_file(path / CONFIG_FILE, "the config.yaml layerscale train writes")  # a FIFO is named, not opened
    if not (path / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{path / CONFIG_FILE}: not a run directory (no {CONFIG_FILE})")
    return path, latest_checkpoint(path)


def _check_extras(config: TrainConfig) -> None:
    try:
        import safetensors  # noqa: F401  (checkpoints are safetensors)
    except ImportError:
        raise ImportError(f"training writes safetensors checkpoints and needs safetensors: {_EXTRA}") from None
    if config.run.tensorboard:
        try:
            import tensorboard  # noqa: F401
        except ImportError:
            raise ImportError("run.tensorboard: true needs tensorboard: pip install 'torch-layerscale[tb]'") from None
    if config.run.progress == "bar":
        try:
            import tqdm  # noqa: F401
        except ImportError:
            raise ImportError(f"run.progress: bar needs tqdm: {_EXTRA}") from None


def _use_deterministic_algorithms(mode: bool, warn_only: bool) -> None:
    """``torch.use_deterministic_algorithms`` without its import of ``torch._inductor`` (seconds of start-up) to set
    a flag only ``torch.compile`` reads; the trainer never compiles. Falls back to the public call."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None or "torch._inductor" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


def _set_determinism(config: TrainConfig, ctx: DistContext) -> None:
    torch.backends.cudnn.benchmark = False
    if not config.run.deterministic:
        return
    if ctx.device.type == "cuda":
        # cuBLAS reproducibility needs a fixed workspace; it only takes effect if set before cuBLAS starts,
        # hence warn-only on CUDA rather than an error from an op without a deterministic kernel.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        _use_deterministic_algorithms(True, warn_only=True)
    else:
        _use_deterministic_algorithms(True, warn_only=False)


@contextmanager
def distributed_run(cfg: TrainConfig) -> Iterator[DistContext]:
    """The process group (under torchrun) and the determinism settings of a run, restored afterwards; checks that
    the global batch divides over the processes."""
    deterministic_before = (torch.are_deterministic_algorithms_enabled(),
                            torch.is_deterministic_algorithms_warn_only_enabled())
    ctx = setup_distributed(cfg.run.device)
    try:
        if cfg.data.batch_size % ctx.world_size:
            raise ValueError(f"config key data.batch_size: {cfg.data.batch_size} (the global batch) is not divisible "
                             f"by the {ctx.world_size} processes; allowed: a multiple of {ctx.world_size}")
        _set_determinism(cfg, ctx)
        yield ctx
    finally:
        teardown_distributed(ctx)
        _use_deterministic_algorithms(*deterministic_before)


def _new_run_dir(config: TrainConfig, ctx: DistContext) -> Path:
    if config.run.out_dir is not None:
        run_dir = Path(config.run.out_dir)
    else:  # one name for all ranks: rank 0's clock
        stamp = broadcast_object(time.strftime("%Y%m%d-%H%M%S"), ctx)
        run_dir = Path("runs") / f"{config.model.name}-{config.data.name}-{stamp}"
    if run_dir.is_dir() and not is_empty_run_dir(run_dir):  # a file there is named by check_writable_dir
        raise FileExistsError(f"{run_dir}: run directory already exists and is not empty; continue it with "
                              f"--resume {run_dir} or choose another --out")
    return check_writable_dir(run_dir)  # a folder that refuses files: one line now, not a traceback later


def with_config_monitor(callbacks: Sequence[Callback], monitor: Callback | None) -> list[Callback]:
    """``callbacks`` and ``monitor``, the diagnostics callback the config's ``diagnostics`` section builds, unless
    the caller passed a :class:`~layerscale.diagnostics.callback.DiagnosticsCallback` of its own: that one replaces
    the config's (two monitors would write two diagnostics records for each recorded step)."""
    from ..diagnostics.callback import DiagnosticsCallback

    if monitor is None or any(isinstance(c, DiagnosticsCallback) for c in callbacks):
        return list(callbacks)
    return [*callbacks, monitor]


def train_built_model(cfg: TrainConfig, ctx: DistContext, model: torch.nn.Module, data: TrainData, run_dir: Path,
                      checkpoint: Path | None, saved: tuple | None, callbacks: Sequence[Callback],
                      model_args: dict[str, Any], config_text: str) -> TrainResult:
    """From a built, checked model and its data to a finished run — the part of :func:`run` shared with
    :func:`~layerscale.train.user_model.run_user_model`: compile and wrap the model, restore a checkpoint (and check
    it is finite), create or update the run folder only once every rank passed every check and rank 0 holds its lock
    (:mod:`~layerscale.train.state.run_lock`: a run directory another live process trains is refused), train, and write
    ``summary.json``. ``saved`` is ``(weights, train_state)`` of ``checkpoint`` when resuming. A new run whose first
    step raises a bad-input error is undone before the error goes on: what its start made is removed
    (:mod:`~layerscale.train.state.failed_start`), so the same ``out`` can be used again."""
    new_run = saved is None and not (run_dir / CONFIG_FILE).is_file()  # neither resumed nor restarted
    start = FailedStart(run_dir) if new_run and ctx.is_main else None  # before the run directory is made
    freeze_for_config(model, cfg.optim.trainable)  # before wrapping: DDP registers only trainable parameters
    model.to(ctx.device)
    planned_steps = planned_total_steps(cfg.optim, steps_per_epoch(len(data.train), cfg.data.batch_size,
                                                                  ctx.world_size))
    if choose_compile(cfg.run.compile, ctx.device, planned_steps)[0]:  # regional, or auto where it measured faster
        from ..models.compile import compile_blocks

        compile_blocks(model)
    wrapped = wrap_model(model, ctx, cfg.run.strategy)
    torch.manual_seed(cfg.run.seed + ctx.rank)  # augmentation / dropout: one stream per rank
    trainer = Trainer(cfg, wrapped, data, ctx, run_dir, list(callbacks), model_args=model_args)
    if saved is not None:
        where = str(checkpoint / STATE_FILE)
        check_position(where, saved[1], trainer.steps_per_epoch)
        check_state_fits(where, saved[1], model=trainer.model, optimizer=trainer.optimizer,
                         scheduler=trainer.scheduler, model_args=model_args)
        try:
            trainer.restore(*saved)
        except ValueError as exc:  # a callback's state (layerscale.train.state.callback_state) refused
            raise ValueError(f"{where}: {exc}") from None
        except (RuntimeError, KeyError, TypeError) as exc:  # optimizer / scheduler state of another setup
            raise ValueError(f"{checkpoint}: training state does not fit this run "
                             f"({str(exc).splitlines()[0]})") from None
        check_resume_finite(trainer, checkpoint, saved[0])  # weights and one forward, before resuming
    restarting = saved is None and (run_dir / CONFIG_FILE).is_file()  # stopped before its first checkpoint
    barrier(ctx)  # every rank has passed every check (on the same files) before rank 0 writes anything
    with ExitStack() as held:
        # One live process per run directory (layerscale.train.state.run_lock): rank 0 takes it, every rank hears.
        refusal = None
        if ctx.is_main:
            try:
                held.enter_context(hold_run_dir(run_dir))
            except RunDirectoryInUse as exc:
                refusal = str(exc)
        refusal = broadcast_object(refusal, ctx)
        if refusal is not None:
            raise RunDirectoryInUse(refusal)
        try:
            return _write_and_train(cfg, ctx, trainer, data, run_dir, checkpoint, saved is not None, restarting,
                                    model_args, config_text)
        except BAD_INPUT_ERRORS:
            if start is not None and trainer.state.step == 0 and latest_checkpoint(run_dir) is None:
                start.undo()  # still holding the lock: nobody else writes there meanwhile
            raise


def _normalization_record(data: TrainData) -> dict[str, list[float]] | None:
    """``{"mean": [...], "std": [...]}`` per channel, [0, 1] pixel scale: the run fed an image ``x`` (pixels scaled
    to [0, 1]) to the model as ``(x − mean) / std``, so a deployed model needs its inputs normalised the same way;
    ``None`` when the trainer normalised nothing (text, a user's own data)."""
    if data.normalization is None:
        return None
    mean, std = data.normalization
    return {"mean": [float(v) for v in mean], "std": [float(v) for v in std]}


def _write_and_train(cfg: TrainConfig, ctx: DistContext, trainer: Trainer, data: TrainData, run_dir: Path,
                     checkpoint: Path | None, resumed: bool, restarting: bool, model_args: dict[str, Any],
                     config_text: str) -> TrainResult:
    """Rank 0 writes the run directory (its lock held), then every rank trains; ``summary.json`` at the end."""
    if ctx.is_main:
        remove_stale_temporaries(run_dir)
        write_text_atomic(run_dir / CONFIG_FILE, config_text)
        if resumed:
            truncate_metrics(run_dir / METRICS_FILE, trainer.state.step)
        elif restarting:  # the records and events of the attempt that never reached a checkpoint
            truncate_metrics(run_dir / METRICS_FILE, -1)
            shutil.rmtree(run_dir / TENSORBOARD_DIR, ignore_errors=True)
        if cfg.run.progress != "none":
            what = (f"resuming {checkpoint} at step {trainer.state.step}" if resumed else
                    "restarting from step 0 (stopped before its first checkpoint)" if restarting else "run directory")
            print(f"{what}: {run_dir}\n{data.description}; {trainer.total_steps} steps "
                  f"({trainer.steps_per_epoch} per epoch), {ctx.world_size} process(es), {ctx.device}",
                  flush=True)
        for warning in (warmup_warning(cfg.optim.warmup_steps, trainer.total_steps),
                        early_stop_on_test_warning(cfg.run.patience, trainer.eval_on)):
            if warning is not None:
                print(warning, file=sys.stderr, flush=True)
        if cfg.data.num_workers > 0:
            warnings.warn(workers_resume_warning(cfg.data.num_workers), UserWarning, stacklevel=4)
    barrier(ctx)
    metrics = MetricsLog(run_dir, active=ctx.is_main, tensorboard=cfg.run.tensorboard,
                         first_step=trainer.state.step)
    try:
        trainer.metrics = metrics
        final = trainer.fit()
        last = latest_checkpoint(run_dir)
        if ctx.is_main:
            summary = {"step": trainer.state.step, "epoch": trainer.state.epoch, "metrics": final,
                       "test": trainer.state.test_eval, "stopped_early_at": trainer.early_stopping.stopped_step,
                       "total_steps": trainer.total_steps, "checkpoint": str(last) if last else None,
                       "model": {"name": cfg.model.name, "args": model_args},
                       "normalization": _normalization_record(data),
                       "environment": run_environment(ctx.device)}
            write_text_atomic(run_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        return TrainResult(run_dir, trainer.state.step, trainer.state.epoch, final, last,
                           dict(trainer.state.test_eval))
    finally:
        metrics.close()
