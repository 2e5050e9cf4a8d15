"""The data a source's model is scored and judged on: a calibration split that scores blocks, chooses what to remove
and heals, and a disjoint evaluation split that judges.

* **A training run** (or one of our folders with ``train.yaml``): evaluation is its held-out split (or ``--data`` /
  ``--data-path``, :func:`~layerscale.sources.run_model.load_eval_data`); calibration is its validation split when
  it has one (``data.validation_fraction``), else the start of its training split.
* **An image model folder** (timm, ours, a Hugging Face image classifier): ``--data NAME`` (``--data-path`` its
  folder) at the model's image size (each image resized whole, not timm's resize-and-centre-crop); calibration from
  the dataset's training split, evaluation from its test split. A timm model's images are normalised with its own
  mean and std (its ``pretrained_cfg``, as timm's scripts do); a Hugging Face model's with its image processor's
  (``preprocessor_config.json``, as its pipelines do), or, saved without one, with the training split's; ours with
  the training split's (as our training does).
* **A language model folder** (Hugging Face, our GPT): the text or JSONL at ``--data-path``
  (:func:`~layerscale.data.corpus_file.read_corpus`) through the model's tokenizer (``--tokenizer``, default the
  folder's own; bytes for our byte-level GPT), cut into windows of ``--seq-len`` tokens and split by position
  (:mod:`~layerscale.data.token_windows`), ``--samples`` windows per split.

Refused in one line before any scoring: a tokenizer whose vocabulary does not fit the model's embedding (an id the
model has no row for), a ``--seq-len`` past the model's positions, no tokenizer for a model that needs one, and the
data refusals of :mod:`~layerscale.data.corpus_file`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ...token_limits import input_embedding_rows, max_positions
from ...sources.image_processor import PROCESSOR_FILE
from .evaluation import EvalSet, as_eval_set

__all__ = ["TextOptions", "DataRequest", "SourceData", "source_data"]


@dataclass(frozen=True)
class TextOptions:
    """Language data options: ``tokenizer`` folder (``None``: the model folder's own, or bytes for a byte model),
    ``seq_len`` tokens per window, ``samples`` windows per split (``None``: all), JSONL ``text_field``."""

    tokenizer: str | os.PathLike | None = None
    seq_len: int = 128
    samples: int | None = 64
    text_field: str | None = None


@dataclass(frozen=True)
class DataRequest:
    """What the command line asked for: dataset name / path, image size, text options, examples per split."""

    data: str | None = None
    data_path: str | os.PathLike | None = None
    img_size: int | None = None
    text: TextOptions | None = None
    examples: int | None = None


@dataclass
class SourceData:
    """``calibration`` and ``evaluation`` :class:`EvalSet` s; ``tokens`` ``True`` when they are token windows of a
    language model (evaluation windows are rows of ``evaluation.inputs`` plus the last target); ``lines`` describe
    them for the user."""

    calibration: EvalSet
    evaluation: EvalSet
    tokens: bool = False
    lines: list[str] = field(default_factory=list)


def _run_data(found: Any, request: DataRequest) -> SourceData:
    from ...sources.run_model import load_eval_data
    from ...train.setup.data_setup import load_train_data

    train_data = found.run.train_data if found.run.train_data is not None else load_train_data(found.run.config)
    evaluation = as_eval_set(load_eval_data(found.run, request.data, request.data_path, train_data=train_data),
                             request.examples)
    if request.data is None and request.data_path is None and train_data.validation is not None:
        calibration, where = as_eval_set(train_data.validation, request.examples), "the run's validation split"
    else:
        calibration, where = as_eval_set(train_data.train, request.examples), "the run's training split"
    language = evaluation.inputs.dim() == 2 and not evaluation.inputs.is_floating_point()
    return SourceData(calibration, evaluation, language,
                      [f"calibration: {len(calibration)} examples of {where}; evaluation: {len(evaluation)} "
                       "held-out examples"])


def _image_data(found: Any, request: DataRequest) -> SourceData:
    if request.data is None:
        raise ValueError(f"{found.path} is an image model: give the dataset with --data NAME (and its folder with "
                         "--data-path)")
    from ...data.registry import load_dataset, renormalized

    model = found.model
    img_size = request.img_size or _image_size(model)
    bundle = load_dataset(request.data, request.data_path, augment=False, img_size=img_size, test_fraction=0.2,
                          seed=0)
    classes = _num_classes(model)
    if isinstance(classes, int) and classes != bundle.num_classes:
        raise ValueError(f"--data {request.data} has {bundle.num_classes} classes but {found.path} has "
                         f"num_classes={classes}; the data does not fit this model")
    channels = _in_chans(model)
    if channels is not None and channels != bundle.in_chans:
        raise ValueError(f"--data {request.data} has {bundle.in_chans} channel(s) but {found.path} takes {channels}; "
                         "the data does not fit this model")
    normalization = _model_normalization(found)
    if normalization is not None:
        bundle = renormalized(bundle, normalization)
    calibration, evaluation = as_eval_set(bundle.train, request.examples), as_eval_set(bundle.test, request.examples)
    if found.library == "timm":
        scaled = "the model's own mean and std (timm's resolve_data_config)"
    elif normalization is not None:
        scaled = f"the model's image processor's mean and std ({PROCESSOR_FILE})"
    else:
        scaled = "the training images' own mean and std" + (f" (the folder has no {PROCESSOR_FILE})"
                                                           if found.library == "transformers" else "")
    return SourceData(calibration, evaluation, False,
                      [f"calibration: {len(calibration)} training images of {bundle.name}; evaluation: "
                       f"{len(evaluation)} test images; normalised with {scaled}"])


def _model_normalization(found: Any) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The per-channel mean and std a model's images are normalised with: a timm model's data configuration
    (timm's ``resolve_data_config``, from the folder's ``pretrained_cfg``), which timm's training and evaluation
    scripts apply; a Hugging Face model's image processor (its folder's ``preprocessor_config.json``,
    :func:`~layerscale.sources.image_processor.processor_normalization`), which its pipelines apply. ``None`` for
    our models (a folder of ours was trained on its dataset's own statistics, which ``load_dataset`` computes) and
    for a Hugging Face folder saved without its image processor."""
    if found.library == "transformers":
        from ...sources.image_processor import processor_normalization

        return processor_normalization(found.path, _in_chans(found.model) or 3)
    if found.library != "timm":
        return None
    from timm.data import resolve_data_config

    config = resolve_data_config({}, model=found.model)
    mean, std = tuple(config["mean"]), tuple(config["std"])
    channels = _in_chans(found.model)
    if channels is not None and not len(mean) == len(std) == channels:
        raise ValueError(f"{found.path}: its data configuration (pretrained_cfg) gives mean {mean} and std {std} "
                         f"for a model of {channels} input channel(s); set one value per channel in its config.json")
    return mean, std


def _hf_config_value(model: nn.Module, key: str) -> Any:
    """``model.config.<key>`` of a Hugging Face model (``None`` for others)."""
    config = getattr(model, "config", None)
    return getattr(config, key, None) if config is not None and not isinstance(config, dict) else None


def _num_classes(model: nn.Module) -> int | None:
    """Output classes of an image model (ours and timm: ``num_classes``; Hugging Face: ``config.num_labels``)."""
    classes = getattr(model, "num_classes", None)
    return classes if isinstance(classes, int) else _hf_config_value(model, "num_labels")


def _image_size(model: nn.Module) -> int | None:
    size = getattr(model, "img_size", None)
    if isinstance(size, int):
        return size
    size = _hf_config_value(model, "image_size")  # Hugging Face: an int, or (height, width)
    if isinstance(size, (tuple, list)) and len(size) == 2 and size[0] == size[1]:
        size = size[0]
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    cfg = model.__dict__.get("pretrained_cfg")
    if isinstance(cfg, dict) and isinstance(cfg.get("input_size"), (tuple, list)):
        return int(cfg["input_size"][-1])
    embed = getattr(model, "patch_embed", None)
    size = getattr(embed, "img_size", None)
    return int(size[0]) if isinstance(size, (tuple, list)) else None


def _in_chans(model: nn.Module) -> int | None:
    """Input channels of an image model (ours: ``in_chans``; timm: its patch embedding's convolution; Hugging
    Face: ``config.num_channels``)."""
    channels = getattr(model, "in_chans", None)
    if isinstance(channels, int):
        return channels
    channels = _hf_config_value(model, "num_channels")
    if isinstance(channels, int) and not isinstance(channels, bool):
        return channels
    proj = getattr(getattr(model, "patch_embed", None), "proj", None)
    return proj.in_channels if isinstance(proj, nn.Conv2d) else None


def _tokenizer_for(found: Any, text: TextOptions):
    from ...data.tokenizer_folder import byte_tokenizer, load_tokenizer

    if text.tokenizer is not None:
        return load_tokenizer(text.tokenizer)
    if found.tokenizer is not None:
        return load_tokenizer(found.tokenizer)
    if found.library == "layerscale" and input_embedding_rows(found.model) == 256:
        return byte_tokenizer()
    raise ValueError(f"{found.path} has no tokenizer files; give --tokenizer FOLDER (a Hugging Face tokenizer "
                     "folder) for its text")


def _text_data(found: Any, request: DataRequest) -> SourceData:
    from ...data.corpus_file import read_corpus
    from ...data.token_windows import split_windows, token_windows

    text = request.text or TextOptions()
    if request.data not in (None, "text"):
        raise ValueError(f"{found.path} is a language model: give its text with --data-path FILE (text or JSONL), "
                         f"not --data {request.data}")
    if request.data_path is None:
        raise ValueError(f"{found.path} is a language model: give its text with --data-path FILE (text or JSONL)")
    model = found.model
    rows, positions = input_embedding_rows(model), max_positions(model)
    if isinstance(text.seq_len, bool) or not isinstance(text.seq_len, int) or text.seq_len < 2:
        raise ValueError(f"--seq-len must be an integer >= 2, got {text.seq_len!r}")
    if positions is not None and text.seq_len > positions:
        raise ValueError(f"--seq-len {text.seq_len} is past the model's {positions} positions; use --seq-len <= "
                         f"{positions}")
    tokenizer = _tokenizer_for(found, text)
    if rows is not None and tokenizer.vocab_size > rows:
        raise ValueError(f"tokenizer {tokenizer.name} has a vocabulary of {tokenizer.vocab_size} but the model's "
                         f"embedding has {rows} rows; the tokenizer does not fit this model")
    ids = tokenizer.encode(read_corpus(request.data_path, text.text_field))
    if ids and rows is not None and max(ids) >= rows:
        raise ValueError(f"tokenizer {tokenizer.name} produced id {max(ids)} but the model's embedding has {rows} "
                         "rows; the tokenizer does not fit this model")
    calibration, evaluation = split_windows(token_windows(ids, text.seq_len), text.samples)
    line = (f"{tokenizer.name} tokenizer: {len(ids):,} tokens; {len(calibration)} calibration and "
            f"{len(evaluation)} evaluation windows of {text.seq_len} tokens")
    return SourceData(as_eval_set(calibration), as_eval_set(evaluation), True, [line])


def source_data(found: Any, request: DataRequest) -> SourceData:
    """Calibration and evaluation data of ``found`` (a :class:`~layerscale.sources.SourceModel`) for ``request``
    (module docstring)."""
    if found.run is not None and not (found.is_language_model and request.text is not None
                                      and request.text.tokenizer is not None):
        return _run_data(found, request)
    if found.is_language_model:
        return _text_data(found, request)
    return _image_data(found, request)
