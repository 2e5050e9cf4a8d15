"""``run(config)``: everything from a config to a finished run directory.

Order matters and is the contract: (1) the config is validated, (2) the data is loaded and the model built for it,
(3) on resume the checkpoint is read, checked against the model and restored — every user error surfaces in
these steps, before anything is written; only then (4) rank 0 creates or updates the run directory and (5)
training starts. A failed start leaves an existing run directory exactly as it was.

Run directory::

    RUN_DIR/config.yaml          the resolved config (every key, defaults filled in)
    RUN_DIR/metrics.jsonl        one JSON record per line (train / eval / callback records)
    RUN_DIR/checkpoints/step_N/  model.safetensors + train_state.pt (the last run.keep_checkpoints)
    RUN_DIR/summary.json         written at the end: final step, metrics, last checkpoint, model name + arguments,
                                 the environment (torch, CPU, threads, device: train/environment.py)
    RUN_DIR/tensorboard/         with run.tensorboard: true
    RUN_DIR/.lock                held (flock) by the live process training the run; a second one is refused
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch

from ..destinations import check_writable_dir
from ..messages import shown_name, shown_value
from .callbacks import Callback
from .state.checkpoint import check_same_architecture, load_checkpoint
from .config.schema import TrainConfig
from .config.config_file import apply_overrides, dump_config, load_config_file
from .state.split_fit import check_same_split
from .setup.initial_weights import load_initial_weights
from .setup.model_build import build_model
from .config.config_source import load_config_source
from .setup.data_setup import load_train_data
from .run_core import (
    CONFIG_FILE,
    SUMMARY_FILE,
    TrainResult,
    _check_extras,
    _new_run_dir,
    _resolve_resume,
    distributed_run,
    train_built_model,
    with_config_monitor,
)

__all__ = ["CONFIG_FILE", "SUMMARY_FILE", "TrainResult", "distributed_run", "run"]


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
        return load_config_source(config)
    raise ValueError(f"config must be a TrainConfig, a mapping or a file path, got {type(config).__name__}")



def _name_the_file(error: ValueError, file: Any, overrides: Sequence[str]) -> NoReturn:
    """Raise ``error`` again, led by the config file's name when the value it refuses came from ``file`` (not from
    an override ``--set key=value``, whose key the line names already): ``c.yaml: config key model.depth: ...``."""
    key = re.search(r"config key ([\w.]+)", str(error))
    overridden = {item.split("=", 1)[0].strip() for item in overrides}
    if not isinstance(file, (str, os.PathLike)) or (key is not None and key.group(1) in overridden):
        raise error
    raise ValueError(f"{shown_name(os.fsdecode(file))}: {error}") from None


def _name_the_model_section(error: ValueError, file: Any, overrides: Sequence[str]) -> NoReturn:
    """Raise a refusal of the model's constructor (or of its size) as an error of the config's ``model`` section:
    ``c.yaml: config key model: init_value must be ...``, led by the config file's name unless a ``--set model.KEY``
    override may have given the refused value (the constructor's message names the argument, not the key)."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    refusal = ValueError(f"config key model: {text}")
    model_overridden = any(item.split("=", 1)[0].strip().startswith("model.") for item in overrides)
    if model_overridden or not isinstance(file, (str, os.PathLike)):
        raise refusal from None
    raise ValueError(f"{shown_name(os.fsdecode(file))}: {refusal}") from None


#: the hooks the trainer calls on every callback (:class:`~layerscale.train.callbacks.Callback`'s methods)
_HOOKS = tuple(name for name in vars(Callback) if name.startswith("on_"))


def _checked_callbacks(callbacks: Any) -> list[Any]:
    """``callbacks`` as a list, each an object with every hook of :class:`Callback` (a subclass, or any object
    defining them all); a one-line ``ValueError`` naming the first that is not, before anything is written."""
    if isinstance(callbacks, (str, bytes, Mapping)) or not isinstance(callbacks, Iterable):
        raise ValueError(f"callbacks must be a list of Callback objects, got {type(callbacks).__name__} "
                         f"{shown_value(callbacks)}")
    callbacks = list(callbacks)
    for index, callback in enumerate(callbacks):
        missing = [hook for hook in _HOOKS if not callable(getattr(callback, hook, None))]
        if missing:
            raise ValueError(f"callbacks[{index}]: {type(callback).__name__} {shown_value(callback)} has no "
                             f"{', '.join(missing)}; expected a layerscale.train.Callback (subclass it and "
                             f"override the hooks you need)")
    return callbacks


def _checked_overrides(overrides: Any) -> list[str]:
    """``overrides`` as a list of ``"key=value"`` strings; a one-line ``ValueError`` for a single string (it would
    be read one character at a time) or an item that is no string."""
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Iterable) or isinstance(overrides, Mapping):
        raise ValueError(f"overrides must be a list of \"key=value\" strings (e.g. [\"optim.lr=0.1\"]), got "
                         f"{type(overrides).__name__} {shown_value(overrides)}")
    overrides = list(overrides)
    for index, item in enumerate(overrides):
        if not isinstance(item, str):
            raise ValueError(f"overrides[{index}] must be a \"key=value\" string, got {type(item).__name__} "
                             f"{shown_value(item)}")
    return overrides


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
    overrides, callbacks = _checked_overrides(overrides), _checked_callbacks(callbacks)
    if model is not None or train_data is not None or eval_data is not None or loss_fn is not None:
        from .user_model import run_user_model

        return run_user_model(model, train_data, eval_data, config, loss_fn=loss_fn, overrides=overrides, out=out,
                              resume=resume, callbacks=callbacks)
    resume_dir, checkpoint = _resolve_resume(resume) if resume is not None else (None, None)
    given = _raw_config(config, resume_dir)  # on resume: the config the run trained with
    raw = apply_overrides(given, list(overrides))
    try:
        cfg = TrainConfig.from_dict(raw)
    except ValueError as exc:
        _name_the_file(exc, resume_dir / CONFIG_FILE if resume_dir is not None else config, overrides)
    source = resume_dir / CONFIG_FILE if resume_dir is not None else config  # the file the values came from
    if out is not None and resume_dir is None:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, out_dir=str(out)))
    if resume_dir is not None:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, out_dir=str(resume_dir)))
    if checkpoint is not None:  # it has trained: its held-out examples stay held out
        check_same_split(TrainConfig.from_dict(given).data, cfg.data, resume_dir)
    _check_extras(cfg)

    with distributed_run(cfg) as ctx:
        torch.manual_seed(cfg.run.seed)  # the same initial weights on every rank
        data = load_train_data(cfg)
        model_args = {**data.model_args, **cfg.model.options}
        try:
            model = build_model(cfg.model.name, model_args)
        except ValueError as exc:  # the constructor names its argument; say which section and file it came from
            _name_the_model_section(exc, source, overrides)
        if cfg.run.init_from is not None:  # on resume the checkpoint's weights then replace these
            load_initial_weights(model, cfg.run.init_from)
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
        from ..surgery.growth.new_blocks import new_block_modules

        monitor = DiagnosticsCallback.from_settings(dataclasses.asdict(cfg.diagnostics), new_block_modules(model))
        if monitor is not None and any(getattr(m, "stream_mix1", None) is not None for m in model.modules()):
            monitor = None  # multi-stream residuals (hc, hc_static, mhc): the block diagnostics refuse them
        return train_built_model(cfg, ctx, model, data, run_dir, checkpoint, saved,
                                 with_config_monitor(callbacks, monitor), model_args,
                                 dump_config(cfg.to_dict()))
