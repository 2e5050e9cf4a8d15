"""Training the user's own ``nn.Module`` on the user's own data: ``run(model=..., train_data=..., eval_data=...)``.

The run is the one a config-built model gets (:mod:`layerscale.train.runner`): AdamW with the no-decay groups,
warmup + cosine, checkpoints written whole, exact resume, the non-finite guard, ``metrics.jsonl``, per-layer
diagnostics, DDP / FSDP under ``torchrun``. What differs is where the model and the data come from.

Contract:

* ``model``: any ``nn.Module``, built (with its initial weights) by the caller; it is moved to the run's device and
  trained in place. ``model(inputs)`` returns what ``loss_fn`` takes.
* ``train_data`` / ``eval_data``: a map-style ``Dataset`` (``len`` and ``[i]``) of ``(inputs, target)`` pairs, or
  a ``DataLoader`` over one. Of a DataLoader the trainer keeps the dataset, ``batch_size`` (per process: the
  global ``data.batch_size`` is it times the number of processes, unless the config sets ``data.batch_size``),
  ``collate_fn`` (the training loader's also collates the evaluation batches) and ``num_workers``; it replaces
  the sampler by its own seeded, resumable, sharded one, because exact resume needs the data order to be a
  function of (seed, epoch). Diagnostics run when the model has blocks of a known layout (ours, timm's, Hugging
  Face's), and are off otherwise.
* ``loss_fn(output, target) -> scalar``: the training loss (mean over the batch). Default: cross-entropy, on class
  logits ``(B, C)`` with integer targets ``(B,)``, or on next-token logits ``(B, T, V)`` with targets ``(B, T)``
  (the dataset yields ``(tokens, next tokens)``); the kind is read from the first training sample's target. A
  target of ``-100`` (the ignore index, Hugging Face's padding label) is left out of the loss, the accuracy and
  the counts (:mod:`layerscale.train.loop.objective`). Integer inputs are token ids: ids outside the model's input
  embedding (its ``get_input_embeddings()`` rows, or its ``vocab_size``) are refused in one line before anything
  is written (:mod:`layerscale.train.setup.token_ids_fit`).
* ``config``: the ``data`` (``batch_size``, ``eval_batch_size``, ``num_workers`` only), ``optim``, ``run`` and
  ``diagnostics`` sections of :class:`~layerscale.train.config.schema.TrainConfig`; no ``model`` section.
* Resume: ``run(model=same_architecture, train_data=same_data, loss_fn=same_loss, resume=RUN_DIR)``, with no
  ``config`` (the run's ``config.yaml`` is used; ``overrides`` change keys). The checkpoint records the model's
  class (``module.QualName``) and its weights' names and shapes; a model of another class or architecture is
  refused with one line before anything is written. The weights, optimizer, schedule, data position and RNG
  states come from the checkpoint, so the resumed run takes the steps an uninterrupted one takes (bit for bit on
  CPU with ``data.num_workers: 0``). The data and the loss cannot be stored; passing the same is the caller's part.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset

from ..destinations import check_writable_dir
from ..messages import shown_value
from .callbacks import Callback
from .state.checkpoint import check_same_architecture, load_checkpoint
from .config.schema import ModelConfig, TrainConfig
from .config.config_file import apply_overrides, dump_config, load_config_file
from .config.config_source import load_config_source
from .setup.data_setup import TrainData
from .setup.token_ids_fit import check_token_ids_fit
from .distributed import broadcast_object
from .loop.objective import LossFn
from .run_core import (
    CONFIG_FILE,
    _check_extras,
    _new_run_dir,
    _resolve_resume,
    distributed_run,
    train_built_model,
    with_config_monitor,
)

__all__ = ["USER_MODEL_PREFIX", "model_identifier", "run_user_model"]

USER_MODEL_PREFIX = "user:"
# Data keys that describe one of the bundled datasets; a run on the user's data has no use for them.
_DATASET_KEYS = ("name", "path", "img_size", "augment", "padding", "hflip", "test_fraction", "split_seed",
                 "val_fraction", "block_size", "validation_fraction")


def model_identifier(model: nn.Module) -> str:
    """``"user:<module>.<QualName>"``: what ``config.yaml`` and the checkpoints record as the model's name."""
    cls = type(model)
    return f"{USER_MODEL_PREFIX}{cls.__module__}.{cls.__qualname__}"


@dataclasses.dataclass(frozen=True)
class _Source:
    dataset: Dataset
    batch_size: int | None
    collate_fn: Callable[[list], Any] | None
    num_workers: int | None


def _source(data: Any, role: str) -> _Source:
    if isinstance(data, DataLoader):
        if isinstance(data.dataset, IterableDataset):
            raise ValueError(f"{role}: a DataLoader over an IterableDataset; the trainer needs a map-style dataset "
                             "(len and [i]) to order, shard and resume it")
        if data.batch_size is None:
            raise ValueError(f"{role}: a DataLoader with a batch_sampler; pass the dataset, or a DataLoader with "
                             "batch_size=")
        return _Source(data.dataset, data.batch_size, data.collate_fn, data.num_workers)
    if isinstance(data, IterableDataset) or not (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
        raise ValueError(f"{role}: expected a map-style torch Dataset (len and [i]) or a DataLoader over one, got "
                         f"{type(data).__name__}")
    return _Source(data, None, None, None)


def _task_kind(dataset: Dataset, loss_fn: LossFn | None) -> str:
    """``"custom"`` with a ``loss_fn``; else ``"text"`` for sequence targets, ``"classification"`` for labels."""
    if len(dataset) == 0:
        raise ValueError("train_data is empty")
    sample = dataset[0]
    if not isinstance(sample, (tuple, list)) or len(sample) != 2:
        raise ValueError(f"train_data[0]: expected an (inputs, target) pair, got {type(sample).__name__}"
                         f"{f' of length {len(sample)}' if isinstance(sample, (tuple, list)) else ''}")
    if loss_fn is not None:
        return "custom"
    target = sample[1]
    integer = isinstance(target, torch.Tensor) and not (target.is_floating_point() or target.is_complex())
    if integer and target.dim() == 1:
        return "text"
    if (isinstance(target, int) and not isinstance(target, bool)) or (integer and target.dim() == 0):
        return "classification"
    shape = (f"a {target.dtype} tensor of shape {tuple(target.shape)}" if isinstance(target, torch.Tensor)
             else type(target).__name__)
    raise ValueError(f"train_data[0]: the default loss takes a class index or a (T,) sequence of next-token ids "
                     f"as target, got {shape}; pass loss_fn=")


def _raw_user_config(config: Any, resume_dir: Path | None, overrides: Sequence[str]) -> dict[str, Any]:
    if resume_dir is not None:
        if config is not None:
            raise ValueError(f"a resumed run uses {resume_dir / CONFIG_FILE}; pass overrides=['key=value'] to "
                             "change keys, not config=")
        raw = load_config_file(resume_dir / CONFIG_FILE)
        raw.pop("model", None)
    elif config is None:
        raw = {}
    elif isinstance(config, TrainConfig):
        raw = config.to_dict()
        raw.pop("model")  # a TrainConfig always holds a model section (its default); the model is given here
        raw["data"] = {k: v for k, v in raw["data"].items() if k not in _DATASET_KEYS}
    elif isinstance(config, Mapping):
        raw = dict(config)
    elif isinstance(config, (str, os.PathLike)):
        raw = load_config_source(config)
    else:
        raise ValueError(f"config must be a TrainConfig, a mapping or a file path, got {type(config).__name__}")
    raw = apply_overrides(raw, list(overrides))
    if raw.get("model"):
        raise ValueError("config key model: a run of a given model= takes no model section; drop it")
    raw.pop("model", None)
    data = raw.get("data") or {}
    given = [k for k in _DATASET_KEYS if isinstance(data, dict) and k in data]
    if given:
        raise ValueError(f"config key data.{given[0]}: a run on train_data= loads no dataset; allowed in data: "
                         "batch_size, eval_batch_size, num_workers")
    return raw


def _run_config(raw: dict[str, Any], model: nn.Module, train: _Source, evaluation: _Source | None,
                world_size: int) -> TrainConfig:
    data = dict(raw.get("data") or {})
    if "batch_size" not in data and train.batch_size is not None:
        data["batch_size"] = train.batch_size * world_size
    if "eval_batch_size" not in data and evaluation is not None and evaluation.batch_size is not None:
        data["eval_batch_size"] = evaluation.batch_size * world_size
    if "num_workers" not in data and train.num_workers is not None:
        data["num_workers"] = train.num_workers
    cfg = TrainConfig.from_dict({**raw, "data": data})
    return dataclasses.replace(cfg, model=ModelConfig(name=model_identifier(model)))


def _config_text(cfg: TrainConfig) -> str:
    plain = cfg.to_dict()
    plain["data"] = {k: v for k, v in plain["data"].items() if k not in _DATASET_KEYS}
    return dump_config(plain)


def run_user_model(model: nn.Module, train_data: Dataset | DataLoader, eval_data: Dataset | DataLoader | None = None,
                   config: TrainConfig | Mapping[str, Any] | str | os.PathLike | None = None, *,
                   loss_fn: LossFn | None = None, overrides: Sequence[str] = (),
                   out: str | os.PathLike | None = None, resume: str | os.PathLike | None = None,
                   callbacks: Sequence[Callback] = ()):
    """Train ``model`` on ``train_data`` (evaluating on ``eval_data``) as :func:`layerscale.train.run` trains a
    config-built model; see the module docstring for the contract. Returns a
    :class:`~layerscale.train.runner.TrainResult`. Bad input raises ``ValueError`` / ``FileNotFoundError`` /
    ``FileExistsError`` before anything is written (token ids past the model's input embedding included:
    :mod:`~layerscale.train.setup.token_ids_fit`); bad input only the first training step meets (a batch the model
    does not take) raises there, and the start is undone (:mod:`~layerscale.train.state.failed_start`)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if train_data is None:
        raise ValueError("train_data is required with model= (a Dataset of (inputs, target) pairs or a DataLoader)")
    if loss_fn is not None and not callable(loss_fn):
        raise ValueError(f"loss_fn must be callable (output, target) -> scalar tensor, got {type(loss_fn).__name__}")
    train = _source(train_data, "train_data")
    evaluation = _source(eval_data, "eval_data") if eval_data is not None else None
    kind = _task_kind(train.dataset, loss_fn)
    check_token_ids_fit(model, train.dataset, "train_data")  # before the run directory is made
    if evaluation is not None:
        check_token_ids_fit(model, evaluation.dataset, "eval_data")
    resume_dir, checkpoint = _resolve_resume(resume) if resume is not None else (None, None)
    raw = _raw_user_config(config, resume_dir, overrides)
    # torchrun sets WORLD_SIZE; the global batch of a DataLoader's per-process batch_size depends on it.
    cfg = _run_config(raw, model, train, evaluation, int(os.environ.get("WORLD_SIZE", "1")))
    run_dir_name = str(resume_dir) if resume_dir is not None else (str(out) if out is not None else None)
    if run_dir_name is not None:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, out_dir=run_dir_name))
    _check_extras(cfg)

    with distributed_run(cfg) as ctx:
        if cfg.run.out_dir is None:  # runs/<ModelClass>-<time>: one name for all ranks (rank 0's clock)
            stamp = broadcast_object(time.strftime("%Y%m%d-%H%M%S"), ctx)
            cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run,
                                                                   out_dir=f"runs/{type(model).__name__}-{stamp}"))
        saved = None
        if checkpoint is not None:
            weights, train_state = load_checkpoint(checkpoint)
            if train_state.get("model") != cfg.model.name:
                raise ValueError(f"{checkpoint}: checkpoint of model {shown_value(train_state.get('model'))}, the "
                                 f"model passed is {cfg.model.name!r}")
            check_same_architecture(checkpoint, weights, model.state_dict())
            saved = (weights, train_state)
        run_dir = check_writable_dir(resume_dir) if resume_dir is not None else _new_run_dir(cfg, ctx)
        from ..diagnostics.callback import DiagnosticsCallback
        from ..diagnostics.discovery import find_blocks, per_branch_refusal
        from ..surgery.growth.new_blocks import new_block_modules

        monitor = DiagnosticsCallback.from_settings(dataclasses.asdict(cfg.diagnostics), new_block_modules(model))
        description = (f"{type(model).__name__}: {sum(p.numel() for p in model.parameters()):,} parameters; "
                       f"{len(train.dataset):,} train / "
                       f"{len(evaluation.dataset) if evaluation else 0:,} eval samples")
        if monitor is not None:
            try:
                refused = [r for r in (per_branch_refusal(p, brief=True) for p in find_blocks(model)) if r is not None]
            except ValueError:  # the per-block diagnostics need residual blocks of a known layout
                monitor = None
                description += "; diagnostics off (no transformer blocks of a known layout)"
            else:
                if refused:  # an unchecked branch reading, or one branch per block
                    monitor = None
                    description += f"; diagnostics off ({refused[0]})"
        data = TrainData(kind, train.dataset, evaluation.dataset if evaluation else None, {}, description,
                         loss_fn=loss_fn, collate_fn=train.collate_fn)
        return train_built_model(cfg, ctx, model, data, run_dir, checkpoint, saved,
                                 with_config_monitor(callbacks, monitor), {}, _config_text(cfg))
