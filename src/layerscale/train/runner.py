"""``run(config)``: everything from a config to a finished run directory.

Order matters and is the contract: (1) the config is validated, (2) the data is loaded and the model built for it,
(3) on resume the checkpoint is read, checked against the model and restored — every user error surfaces in
these steps, before anything is written; only then (4) rank 0 creates or updates the run directory and (5)
training starts. A failed start leaves an existing run directory exactly as it was.

Run directory::

    RUN_DIR/config.yaml          the resolved config (every key, defaults filled in)
    RUN_DIR/metrics.jsonl        one JSON record per line (train / eval / callback records)
    RUN_DIR/checkpoints/step_N/  model.safetensors + train_state.pt (the last run.keep_checkpoints)
    RUN_DIR/summary.json         written at the end: final step, metrics, last checkpoint, model name + arguments
    RUN_DIR/tensorboard/         with run.tensorboard: true
    RUN_DIR/.lock                held (flock) by the live process training the run; a second one is refused
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..atomic_io import write_text_atomic
from ..destinations import check_writable_dir
from ..messages import shown_value
from ..paths import describe_non_file
from .auto_policy import choose_compile
from .budget import planned_total_steps, steps_per_epoch
from .callbacks import Callback
from .checkpoint import (
    CHECKPOINT_DIR,
    MODEL_FILE,
    STATE_FILE,
    check_same_architecture,
    latest_checkpoint,
    load_checkpoint,
    remove_stale_temporaries,
)
from .config import TrainConfig
from .config_file import apply_overrides, dump_config, load_config_file
from .data_setup import TrainData, load_train_data
from .finite_check import check_resume_finite
from .distributed import (
    DistContext,
    barrier,
    broadcast_object,
    setup_distributed,
    teardown_distributed,
    wrap_model,
)
from .metrics_log import METRICS_FILE, TENSORBOARD_DIR, MetricsLog, truncate_metrics
from .model_build import build_model
from .run_lock import RunDirectoryInUse, hold_run_dir, is_empty_run_dir
from .run_summary import warmup_warning
from .train_state import check_position
from .trainer import Trainer

__all__ = ["CONFIG_FILE", "SUMMARY_FILE", "TrainResult", "run"]

CONFIG_FILE = "config.yaml"
SUMMARY_FILE = "summary.json"
_EXTRA = "pip install 'torch-layerscale[train]'"


@dataclass(frozen=True)
class TrainResult:
    """What a finished run returns: its directory, optimizer steps done, completed epochs, the last evaluation
    record (``loss``, ``accuracy``, ``perplexity`` for text, ``samples``) and the last checkpoint directory."""

    run_dir: Path
    step: int
    epoch: int
    metrics: dict[str, Any]
    checkpoint: Path | None


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
    if not (path / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{path / CONFIG_FILE}: not a run directory (no {CONFIG_FILE})")
    return path, latest_checkpoint(path)


def _raw_config(config: Any, resume_dir: Path | None) -> dict[str, Any]:
    if resume_dir is not None:
        if config is not None:
            raise ValueError(f"a resumed run uses {resume_dir / CONFIG_FILE}; pass --set key=value to change keys, "
                             "not --config")
        raw = load_config_file(resume_dir / CONFIG_FILE)
        name = raw["model"].get("name") if isinstance(raw.get("model"), dict) else None
        if isinstance(name, str) and name.startswith("user:"):
            raise ValueError(f"{resume_dir} trained a model given in Python ({name[5:]}); resume it there with "
                             "layerscale.train.run(model=..., train_data=..., resume=RUN_DIR)")
        return raw
    if config is None:
        raise ValueError("no config given: pass --config FILE.yaml (or resume a run with --resume RUN_DIR)")
    if isinstance(config, TrainConfig):
        return config.to_dict()
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, (str, os.PathLike)):
        return load_config_file(config)
    raise ValueError(f"config must be a TrainConfig, a mapping or a file path, got {type(config).__name__}")


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
    if run_dir.exists() and not is_empty_run_dir(run_dir):
        raise FileExistsError(f"{run_dir}: run directory already exists and is not empty; continue it with "
                              f"--resume {run_dir} or choose another --out")
    return check_writable_dir(run_dir)  # a folder that refuses files: one line now, not a traceback later


def run(config: TrainConfig | Mapping[str, Any] | str | os.PathLike | None = None, *,
        overrides: Sequence[str] = (), out: str | os.PathLike | None = None,
        resume: str | os.PathLike | None = None, callbacks: Sequence[Callback] = (),
        model: torch.nn.Module | None = None, train_data: Any = None, eval_data: Any = None,
        loss_fn: Callable[[Any, Any], torch.Tensor] | None = None) -> TrainResult:
    """Train from ``config`` (a :class:`TrainConfig`, a mapping of sections, or a YAML/JSON file), with
    ``overrides`` (``"section.key=value"``), into ``out`` (else ``run.out_dir``, else ``runs/<model>-<data>-<time>``),
    or continue the run ``resume`` (a run directory: its latest checkpoint; or one checkpoint directory).

    Works the same under ``torchrun`` (every rank calls it; rank 0 writes). Raises ``ValueError``,
    ``FileNotFoundError``, ``FileExistsError`` or ``ImportError`` for bad input, before writing anything;
    :class:`~layerscale.train.nonfinite.NonFiniteError` if the run diverges with ``run.on_nonfinite: stop``.

    With ``model`` (any ``nn.Module``) and ``train_data`` / ``eval_data`` (Datasets of ``(inputs, target)`` or
    DataLoaders), trains the user's model instead, with ``loss_fn(output, target)`` (default: cross-entropy for
    class or next-token logits) and a config without a model section; contract in
    :mod:`layerscale.train.user_model`.
    """
    if model is not None or train_data is not None or eval_data is not None or loss_fn is not None:
        from .user_model import run_user_model

        return run_user_model(model, train_data, eval_data, config, loss_fn=loss_fn, overrides=overrides, out=out,
                              resume=resume, callbacks=callbacks)
    resume_dir, checkpoint = _resolve_resume(resume) if resume is not None else (None, None)
    raw = apply_overrides(_raw_config(config, resume_dir), list(overrides))
    cfg = TrainConfig.from_dict(raw)
    if out is not None and resume_dir is None:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, out_dir=str(out)))
    if resume_dir is not None:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, out_dir=str(resume_dir)))
    _check_extras(cfg)

    with distributed_run(cfg) as ctx:
        torch.manual_seed(cfg.run.seed)  # the same initial weights on every rank
        data = load_train_data(cfg)
        model_args = {**data.model_args, **cfg.model.options}
        model = build_model(cfg.model.name, model_args)
        saved = None
        if checkpoint is not None:
            weights, train_state = load_checkpoint(checkpoint)
            check_same_architecture(checkpoint, weights, model.state_dict())
            if train_state.get("model") != cfg.model.name:
                raise ValueError(f"{checkpoint}: checkpoint of model {shown_value(train_state.get('model'))}, the "
                                 f"config builds {cfg.model.name!r}")
            saved = (weights, train_state)
        run_dir = check_writable_dir(resume_dir) if resume_dir is not None else _new_run_dir(cfg, ctx)
        # Imported here: diagnostics builds on the trainer's callback API (no import cycle at module load).
        from ..diagnostics.callback import DiagnosticsCallback

        monitor = DiagnosticsCallback.from_settings(dataclasses.asdict(cfg.diagnostics))
        if monitor is not None and any(getattr(m, "stream_mix1", None) is not None for m in model.modules()):
            monitor = None  # multi-stream residuals (hc, hc_static, mhc): the block diagnostics refuse them
        return train_built_model(cfg, ctx, model, data, run_dir, checkpoint, saved,
                                 [*callbacks, *([monitor] if monitor else [])], model_args,
                                 dump_config(cfg.to_dict()))


def train_built_model(cfg: TrainConfig, ctx: DistContext, model: torch.nn.Module, data: TrainData, run_dir: Path,
                      checkpoint: Path | None, saved: tuple | None, callbacks: Sequence[Callback],
                      model_args: dict[str, Any], config_text: str) -> TrainResult:
    """From a built, checked model and its data to a finished run — the part of :func:`run` shared with
    :func:`~layerscale.train.user_model.run_user_model`: compile and wrap the model, restore a checkpoint (and check
    it is finite), create or update the run folder only once every rank passed every check and rank 0 holds its lock
    (:mod:`~layerscale.train.run_lock`: a run directory another live process trains is refused), train, and write
    ``summary.json``. ``saved`` is ``(weights, train_state)`` of ``checkpoint`` when resuming."""
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
        check_position(str(checkpoint / STATE_FILE), saved[1], trainer.steps_per_epoch)
        try:
            trainer.restore(*saved)
        except (RuntimeError, KeyError, TypeError) as exc:  # optimizer / scheduler state of another setup
            raise ValueError(f"{checkpoint}: training state does not fit this run "
                             f"({str(exc).splitlines()[0]})") from None
        check_resume_finite(trainer, checkpoint, saved[0])  # weights and one forward, before resuming
    restarting = saved is None and (run_dir / CONFIG_FILE).is_file()  # stopped before its first checkpoint
    barrier(ctx)  # every rank has passed every check (on the same files) before rank 0 writes anything
    with ExitStack() as held:
        # One live process per run directory (layerscale.train.run_lock): rank 0 takes it, every rank hears.
        refusal = None
        if ctx.is_main:
            try:
                held.enter_context(hold_run_dir(run_dir))
            except RunDirectoryInUse as exc:
                refusal = str(exc)
        refusal = broadcast_object(refusal, ctx)
        if refusal is not None:
            raise RunDirectoryInUse(refusal)
        return _write_and_train(cfg, ctx, trainer, data, run_dir, checkpoint, saved is not None, restarting,
                                model_args, config_text)


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
        warning = warmup_warning(cfg.optim.warmup_steps, trainer.total_steps)
        if warning is not None:
            print(warning, file=sys.stderr, flush=True)
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
                       "model": {"name": cfg.model.name, "args": model_args}}
            write_text_atomic(run_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        return TrainResult(run_dir, trainer.state.step, trainer.state.epoch, final, last)
    finally:
        metrics.close()
