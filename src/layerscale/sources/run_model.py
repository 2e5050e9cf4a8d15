"""A training run of ``layerscale train`` as a source: from a run directory, a checkpoint directory or a weights file
to a model and its evaluation set (one kind of source of :func:`layerscale.sources.read_source`).

* a **run directory** written by ``layerscale train`` (``config.yaml`` + ``checkpoints/step_*/``): its latest
  checkpoint;
* a **checkpoint directory** ``RUN/checkpoints/step_N/``: that checkpoint, with the run's ``config.yaml``;
* a **weights file** (safetensors, or a PyTorch file read with ``weights_only=True``) with ``config=`` a training
  config (YAML/JSON) that builds the model.

A run or checkpoint directory is a folder someone else made: it is refused (one line, before any file in it is
read) when its ``config.yaml``, its ``checkpoints/`` folder, a checkpoint directory or a file in one is a symbolic
link (:func:`~layerscale.sources.model_folder.check_no_links`): ``layerscale train`` writes none, and a link would
load a config or weights from anywhere on the disk under the run's name.

The model is rebuilt exactly as the trainer built it (``create_model`` with the data's arguments under the
configured options) and the weights must fit it (``ValueError`` naming the first differences otherwise); for a
checkpoint directory the model its training state records must also compute the same function with them (head
count, residual method, norm ε: a config given for another run's checkpoint is refused when they differ). The
evaluation set is the run's own held-out split, or another dataset given by name (image datasets) or by path (text,
for language models); one that does not fit the model is refused with a one-line ``ValueError``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn
from torch.utils.data import Dataset

__all__ = ["RunModel", "check_trained_model", "load_run_model", "load_eval_data"]


@dataclass
class RunModel:
    """A rebuilt model with its weights, the validated training config, the checkpoint read, its arguments and
    (when already loaded) the run's dataset."""

    model: nn.Module
    config: Any
    checkpoint: Path
    model_args: dict[str, Any]
    train_data: Any = None  # the run's loaded dataset (TrainData), kept so its splits are not read twice


def _locate(source: Path, config: str | os.PathLike | None) -> tuple[Path, Path, bool]:
    """``(config file, weights location, is a checkpoint directory)``; a link in a run or checkpoint directory is
    refused (module docstring)."""
    from ..diagnostics.run_data import CONFIG_FILE
    from ..train.state.checkpoint import CHECKPOINT_DIR, MODEL_FILE, latest_checkpoint
    from ..untrusted_files import UntrustedFileError
    from .model_folder import check_no_links

    if not source.exists():
        raise FileNotFoundError(f"{source}: no such run directory, checkpoint or weights file")
    if source.is_file():
        if config is None:
            raise ValueError(f"{source}: a weights file needs config= (--config): the training config that builds "
                             "its model")
        return Path(config), source, False
    if (source / MODEL_FILE).is_file() and source.parent.name == CHECKPOINT_DIR:
        check_no_links(source, "checkpoint directory")
        run_config = source.parent.parent / CONFIG_FILE
        if not config and run_config.is_symlink():
            raise UntrustedFileError(f"{run_config}: refused (a symbolic link inside the run directory); links are "
                                     "not followed")
        return (Path(config) if config else run_config), source, True
    if (source / CONFIG_FILE).is_file() or (source / CHECKPOINT_DIR).is_dir():
        check_no_links(source, "run directory")
        if (source / CHECKPOINT_DIR).is_dir():
            check_no_links(source / CHECKPOINT_DIR, "run's checkpoints folder")
        checkpoint = latest_checkpoint(source)
        if checkpoint is None:
            raise FileNotFoundError(f"{source}: run directory without any checkpoint in {CHECKPOINT_DIR}/")
        check_no_links(checkpoint, "checkpoint directory")
        return (Path(config) if config else source / CONFIG_FILE), checkpoint, True
    raise ValueError(f"{source}: not a run directory (config.yaml + {CHECKPOINT_DIR}/), a checkpoint directory "
                     f"({CHECKPOINT_DIR}/step_N/), a weights file or a model folder (config.json of ours, timm or "
                     "Hugging Face)")


def load_run_model(source: str | os.PathLike, config: str | os.PathLike | None = None,
                   train_data: Any = None) -> RunModel:
    """Rebuild the model of ``source`` (see the module docstring) with its trained weights, in eval mode.

    ``train_data`` (a :class:`~layerscale.train.setup.data_setup.TrainData`) saves loading the run's dataset again.
    """
    from ..checkpoint_io import read_state_dict_file
    from ..models.registry import create_model
    from ..models.validation import check_fits_memory
    from ..train.state.checkpoint import check_same_architecture, load_checkpoint
    from ..train.config.schema import TrainConfig
    from ..train.setup.data_setup import load_train_data
    from ..weight_checks import check_finite_tensors

    config_path, weights_path, is_checkpoint_dir = _locate(Path(source), config)
    if not os.path.lexists(config_path):  # a FIFO or a folder there is named by load_config_file, not "not found"
        raise FileNotFoundError(f"{config_path}: training config not found")
    cfg = TrainConfig.from_file(config_path)
    data = train_data if train_data is not None else load_train_data(cfg)
    model_args = {**data.model_args, **cfg.model.options}
    try:  # sizes beyond this machine's memory are refused before anything is allocated
        check_fits_memory(lambda: create_model(cfg.model.name, **model_args), f"{config_path}: model "
                          f"{cfg.model.name!r}", "loading it", 2, "the model and the checkpoint's tensors")
        model = create_model(cfg.model.name, **model_args)
    except TypeError as exc:
        raise ValueError(f"model {cfg.model.name!r}: {str(exc).splitlines()[0]}") from None
    if is_checkpoint_dir:
        weights, state = load_checkpoint(weights_path)
        check_trained_model(weights_path, state, model)
    else:
        weights = read_state_dict_file(weights_path).tensors
    check_same_architecture(weights_path, weights, model.state_dict())
    check_finite_tensors(weights, str(weights_path))  # dtypes checked just above; NaN weights refused here
    model.load_state_dict(weights)
    return RunModel(model.eval(), cfg, weights_path, model_args, data)


def check_trained_model(checkpoint: Path, state: dict[str, Any], model: nn.Module) -> None:
    """``ValueError`` when the checkpoint's training state records a model (its name and arguments) that computes
    another function with these weights than ``model``, built from the config (another config given for a run's
    checkpoint): keys and shapes cannot show a head count, residual method or norm ε."""
    import torch

    from ..interop.settings import compare_settings, model_settings
    from ..models.registry import create_model

    if not isinstance(state.get("model_args"), dict):
        return  # checkpoints of earlier versions do not record the arguments
    try:
        with torch.device("meta"):
            trained = create_model(state["model"], **state["model_args"])
    except (TypeError, ValueError):
        return  # not rebuildable here: the keys and shapes are still checked
    try:
        compare_settings(model_settings(trained), model_settings(model), "the trained model", "configured model")
    except ValueError as exc:
        raise ValueError(f"{checkpoint}: {exc}") from None


def load_eval_data(run: RunModel, data: str | None = None, data_path: str | os.PathLike | None = None,
                   train_data: Any = None) -> Dataset:
    """The evaluation set for ``run``: its own held-out split (``data=None``), else dataset ``data`` (an image
    dataset name, read from ``data_path``) or, for a language model, the text at ``data_path`` (its held-out end,
    ``data.val_fraction`` of the run's config). Raises a one-line ``ValueError`` when it does not fit the model."""
    from ..train.config.schema import TEXT_DATASET
    from ..train.setup.data_setup import is_language_model, load_train_data

    cfg = run.config
    language = is_language_model(cfg.model.name)
    if data is None and data_path is None:
        loaded = train_data if train_data is not None else load_train_data(cfg)
        if loaded.eval is None or len(loaded.eval) == 0:
            raise ValueError(f"the run's dataset {cfg.data.name!r} has no held-out split; give --data")
        return loaded.eval
    if language:
        if data not in (None, TEXT_DATASET) or data_path is None:
            raise ValueError(f"model {cfg.model.name!r} is a language model: give the evaluation text with "
                             f"--data-path (and --data {TEXT_DATASET} or nothing), got --data {data!r}")
        from ..data.text import load_text

        from ..models.registry import model_defaults

        block_size = cfg.data.block_size or run.model_args.get("block_size",
                                                               model_defaults(cfg.model.name)["block_size"])
        bundle = load_text(data_path, block_size, cfg.data.val_fraction or 0.1)
        return bundle.val
    if data is None:
        data = cfg.data.name
    if data == TEXT_DATASET:
        raise ValueError(f"model {cfg.model.name!r} is an image classifier; --data {TEXT_DATASET} is text")
    from ..data.registry import load_dataset

    bundle = load_dataset(data, data_path, augment=False, img_size=run.model_args.get("img_size"),
                          test_fraction=cfg.data.test_fraction, seed=cfg.data.split_seed)
    for key, value, what in (("num_classes", bundle.num_classes, "classes"), ("in_chans", bundle.in_chans,
                                                                              "channels")):
        expected = run.model_args.get(key)
        if expected is not None and expected != value:
            raise ValueError(f"evaluation set {bundle.name!r} has {value} {what} but the model has {key}={expected}; "
                             "the evaluation set does not fit this model")
    return bundle.test
