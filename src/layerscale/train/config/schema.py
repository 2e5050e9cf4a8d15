"""The training configuration: five dataclass sections (model, data, optim, run, diagnostics), validated once,
before anything is written.

Contract of :meth:`TrainConfig.from_dict`: every key must be known, every value of the declared type (an ``int``
is accepted where a ``float`` is declared; ``bool`` is never an ``int``), inside its declared range or choices, and
the cross-field rules hold (``optim.min_lr <= optim.lr``). The first violation raises one ``ValueError`` naming the
dotted key, the value and what is allowed. The ``model`` section is ``name`` plus any constructor argument of that
model (checked against :func:`layerscale.models.model_defaults`); ``img_size``, ``in_chans``, ``num_classes`` and
``vocab_size`` are filled from the dataset when not given. The full reference is ``docs/training.md`` (a test keeps
it in step with the fields declared here).
"""

from __future__ import annotations

import dataclasses
import math
import os
import typing
from dataclasses import dataclass, field
from types import NoneType, UnionType
from typing import Any

from ...data.registry import DATASET_NAMES
from ...messages import shown_name, shown_value
from ...suggest import did_you_mean
from .config_tree import check_config_tree

__all__ = [
    "SECTIONS",
    "TEXT_DATASET",
    "DataConfig",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "TrainConfig",
    "iter_fields",
]

TEXT_DATASET = "text"
SECTIONS = ("model", "data", "optim", "run", "diagnostics")


#: The largest seed: torch's generators take seeds below 2**64, and a run derives seed + epoch, seed + rank and
#: seed + rank + 7919 · step from it, which stay below 2**64 from any seed up to 2**63 - 1.
MAX_SEED = 2**63 - 1


def _key(default: Any, help: str, *, choices: tuple | None = None, low: float | None = None,
         high: float | None = None, low_open: bool = False, high_open: bool = False) -> Any:
    """A config field: its default, one line of help, and what is allowed (choices or a numeric interval)."""
    meta = {"help": help, "choices": choices, "low": low, "high": high, "low_open": low_open, "high_open": high_open}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ModelConfig:
    """``name`` (see ``layerscale models``) and ``options``: constructor overrides passed to ``create_model``.

    In a file the options sit next to ``name`` (``model: {name: vit, depth: 4}``)."""

    name: str = "vit"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DataConfig:
    name: str = _key("digits", "dataset", choices=DATASET_NAMES + (TEXT_DATASET,))
    path: str | None = _key(None, "data folder (mnist, fashion-mnist [default: the Debian dataset-fashion-mnist "
                                  "folder], cifar10, cifar100, imagefolder) or text file/folder (text)")
    img_size: int | None = _key(None, "resize images to img_size x img_size (default: model.img_size if given, "
                                      "else the dataset's size)", low=1)
    augment: bool = _key(True, "random crop (and flip where the dataset defaults to it) on the training split")
    padding: int | None = _key(None, "crop padding in pixels (default: 1/2/4 px at 8/28/32 px, scaled)", low=0)
    hflip: bool | None = _key(None, "horizontal flips (default: on for cifar10/cifar100/imagefolder only)")
    test_fraction: float = _key(0.2, "test share for datasets without a split (digits, flat image folder)",
                                low=0.0, high=1.0, low_open=True, high_open=True)
    split_seed: int = _key(0, "seed of that split (kept apart from run.seed so runs share one split)", low=0,
                           high=MAX_SEED)
    val_fraction: float = _key(0.1, "text: share of the corpus (its end) held out for evaluation",
                               low=0.0, high=1.0, low_open=True, high_open=True)
    validation_fraction: float = _key(0.0, "carve a validation split of this share from the TRAINING split (images: "
                                           "stratified by class; text: the end of the training text), fixed by "
                                           "data.split_seed; periodic evaluation, early stopping and learning-rate "
                                           "tuning then use it and the test split is read once, at the end (0: "
                                           "no validation split, evaluation reads the test split)",
                                      low=0.0, high=1.0, high_open=True)
    block_size: int | None = _key(None, "text: tokens per training window (default: the model's block_size)",
                                  low=1)
    batch_size: int = _key(64, "GLOBAL batch size: samples per optimizer step summed over all ranks; each rank "
                               "takes batch_size / world_size", low=1)
    eval_batch_size: int | None = _key(None, "global evaluation batch size (default: batch_size)", low=1)
    num_workers: int = _key(0, "DataLoader worker processes per rank (bit-exact resume needs 0)", low=0)


@dataclass(frozen=True)
class OptimConfig:
    epochs: int = _key(10, "passes over the training split", low=1)
    max_steps: int = _key(0, "stop after this many optimizer steps (0: epochs x steps per epoch); the schedule "
                             "ends here", low=0)
    lr: float = _key(1e-3, "peak learning rate of AdamW", low=0.0, low_open=True)
    min_lr: float = _key(1e-5, "learning rate at the end of the cosine (<= lr)", low=0.0)
    warmup_steps: int = _key(0, "linear warmup steps, from lr/warmup_steps up to lr", low=0)
    weight_decay: float = _key(0.05, "AdamW decoupled weight decay (not applied to scales, norms, biases, "
                                     "tokens, position embeddings)", low=0.0)
    decay_scales: bool = _key(False, "also decay the LayerScale-family scales")
    betas: tuple[float, float] = _key((0.9, 0.999), "AdamW betas, each in [0, 1)", low=0.0, high=1.0,
                                      high_open=True)
    eps: float = _key(1e-8, "AdamW epsilon", low=0.0, low_open=True)
    label_smoothing: float = _key(0.0, "label smoothing of the training loss (evaluation never smooths)",
                                  low=0.0, high=1.0, high_open=True)
    grad_clip: float = _key(1.0, "clip the global gradient L2 norm to this (0: no clipping)", low=0.0)
    trainable: str = _key("all", "new_blocks: train only the blocks that layerscale grow inserted (recorded in the "
                                 "model folder of run.init_from), everything else frozen (LLaMA Pro)",
                          choices=("all", "new_blocks"))


@dataclass(frozen=True)
class RunConfig:
    out_dir: str | None = _key(None, "run directory (default: runs/<model>-<dataset>-<time>); --out overrides")
    init_from: str | None = _key(None, "start from these weights instead of a random init: a model folder "
                                       "written by layerscale grow / prune or save_pretrained, a run or "
                                       "checkpoint directory, or a weights file; the model section must build "
                                       "the same architecture")
    seed: int = _key(0, "seed of model init, data order (seed + epoch) and augmentation (seed + rank)", low=0,
                     high=MAX_SEED)
    device: str = _key("auto", "auto: cuda when available, else cpu", choices=("auto", "cpu", "cuda"))
    precision: str = _key("fp32", "bf16: autocast the forward to bfloat16; auto: bf16 where it measured faster "
                                  "(by device and model width, see layerscale.train.loop.auto_policy)",
                          choices=("fp32", "bf16", "auto"))
    compile: str = _key("off", "regional: torch.compile every transformer block (Inductor); auto: only where that "
                               "measured faster (see layerscale.train.loop.auto_policy)",
                        choices=("off", "regional", "auto"))
    deterministic: bool = _key(True, "torch.use_deterministic_algorithms (warn-only on CUDA)")
    strategy: str = _key("ddp", "under torchrun with more than one process: ddp, or fsdp (FSDP2 fully_shard of "
                                "every block, then the model)", choices=("ddp", "fsdp"))
    eval_every_steps: int = _key(0, "also evaluate every N steps (0: only at the end of every epoch)", low=0)
    eval_batches: int = _key(0, "periodic evaluations read at most this many batches per rank (0: the whole split); "
                                "the evaluation the run ends on reads the whole split", low=0)
    log_every_steps: int = _key(10, "write a train record (and a progress line) every N steps", low=1)
    checkpoint_every_steps: int = _key(0, "checkpoint every N steps (0: only at the end); always at the end",
                                       low=0)
    keep_checkpoints: int = _key(3, "keep the last k checkpoints", low=1)
    on_nonfinite: str = _key("stop", "non-finite loss or gradient: stop the run, or skip that step",
                             choices=("stop", "skip"))
    tensorboard: bool = _key(False, "also write TensorBoard event files (needs the tb extra)")
    progress: str = _key("auto", "auto: a tqdm bar on a terminal, log lines otherwise",
                         choices=("auto", "bar", "log", "none"))
    patience: int = _key(0, "early stopping: end the run after this many evaluations in a row without an "
                            "improvement of the evaluation accuracy (text: loss) by more than run.min_delta "
                            "(0: off)", low=0)
    min_delta: float = _key(0.0, "early stopping: the smallest change that counts as an improvement", low=0.0)
    stop_at_step: int = _key(0, "pause the run after this many steps (evaluate, checkpoint, exit) while keeping "
                                "the learning-rate schedule of the full budget, so that resuming with a larger "
                                "value continues it exactly (0: run to the end); used by learning-rate tuning",
                             low=0)
    evaluate_test: bool = _key(True, "with a validation split: evaluate the test split once when the run ends "
                                     "(tuning runs set false, so the test split is never read)")


@dataclass(frozen=True)
class DiagnosticsConfig:
    """The per-layer monitor (``layerscale.diagnostics``, see ``docs/diagnostics.md``)."""

    enabled: bool = _key(True, "record per-block scales, branch/stream ratios, stream RMS, gradient norms and "
                               "update ratios into metrics.jsonl")
    every: int = _key(50, "record every N optimizer steps (and step 1)", low=1)
    ratio_max: float = _key(10.0, "warn when a branch-to-stream ratio exceeds this (0: off)", low=0.0)
    ratio_growth: float = _key(10.0, "warn when a ratio grows by more than this factor between records (0: off)",
                               low=0.0)
    ratio_growth_min: float = _key(0.1, "...but only once the ratio is at least this", low=0.0)
    scale_collapse: float = _key(0.1, "warn when mean|gamma| falls below this fraction of its value when "
                                      "training started (the initial or loaded gamma; 0: off)", low=0.0)
    track_updates: bool = _key(True, "measure the update-to-weight ratio (one weight copy on recorded steps)")


@dataclass(frozen=True)
class TrainConfig:
    """A complete, validated training configuration. Build it with :meth:`from_dict`."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)

    @classmethod
    def from_dict(cls, raw: Any) -> TrainConfig:
        """Validate ``raw`` (a mapping of sections) into a config; raises ``ValueError`` on the first bad key."""
        if not isinstance(raw, dict):
            raise ValueError(f"a training config must be a mapping of sections {SECTIONS}, got {type(raw).__name__}")
        check_config_tree(raw, plain=False)  # bounded depth and size, string keys: before anything reads a value
        unknown = sorted(set(raw) - set(SECTIONS))
        if unknown:
            raise ValueError(f"unknown config key {shown_name(unknown[0])}{did_you_mean(unknown[0], SECTIONS)}; "
                             f"allowed: {', '.join(SECTIONS)}")
        for name in SECTIONS:
            if raw.get(name) is not None and not isinstance(raw[name], dict):
                raise ValueError(f"config key {name}: expected a mapping, got {shown_value(raw[name])}")
        config = cls(
            model=_model_section(raw.get("model") or {}),
            data=_section(DataConfig, "data", raw.get("data") or {}),
            optim=_section(OptimConfig, "optim", raw.get("optim") or {}),
            run=_section(RunConfig, "run", raw.get("run") or {}),
            diagnostics=_section(DiagnosticsConfig, "diagnostics", raw.get("diagnostics") or {}),
        )
        if config.optim.min_lr > config.optim.lr:
            raise ValueError(f"config key optim.min_lr: {config.optim.min_lr!r} must be <= optim.lr "
                             f"({config.optim.lr!r})")
        return config

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> TrainConfig:
        """:meth:`from_dict` of the config file ``path`` (a run's ``config.yaml``, a model folder's ``train.yaml``,
        read with :func:`~layerscale.train.config.config_file.load_config_file`); every refusal is one line naming
        the file: ``RUN/config.yaml: config key model.depth: expected int, got 'x' (str)``."""
        from .config_file import load_config_file

        raw = load_config_file(path)
        try:
            return cls.from_dict(raw)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (YAML/JSON-ready); ``from_dict(to_dict())`` gives the same config back."""
        out: dict[str, Any] = {"model": {"name": self.model.name, **self.model.options}}
        for name in SECTIONS[1:]:
            section = getattr(self, name)
            out[name] = {f.name: _plain(getattr(section, f.name)) for f in dataclasses.fields(section)}
        return out


def iter_fields() -> list[tuple[str, dataclasses.Field, Any]]:
    """``(dotted key, field, resolved type)`` of every fixed key (for the documentation and its test)."""
    rows = []
    for name, cls in (("data", DataConfig), ("optim", OptimConfig), ("run", RunConfig),
                      ("diagnostics", DiagnosticsConfig)):
        hints = typing.get_type_hints(cls)
        rows.extend((f"{name}.{f.name}", f, hints[f.name]) for f in dataclasses.fields(cls))
    return rows


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _section(cls: type, section: str, raw: dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ValueError(f"unknown config key {section}.{shown_name(unknown[0])}"
                         f"{did_you_mean(unknown[0], fields)}; allowed in "
                         f"{section}: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in raw.items():
        key = f"{section}.{name}"
        try:
            value = _check_type(key, value, hints[name])
        except ValueError as exc:
            choices = fields[name].metadata.get("choices")
            if choices is None:
                raise
            note = " (YAML reads yes / no / on / off as a boolean)" if isinstance(value, bool) else ""
            raise ValueError(f"{exc}{note}; allowed: {', '.join(map(str, choices))}") from None
        _check_allowed(key, value, fields[name].metadata)
        values[name] = value
    return cls(**values)


def _model_section(raw: dict[str, Any]) -> ModelConfig:
    # Imported here: the registry pulls in every model, which config users that only read files do not need.
    from ...models.registry import list_models, model_defaults

    name = raw.get("name", ModelConfig.name)
    if not isinstance(name, str) or name not in list_models():
        raise ValueError(f"config key model.name: unknown model {shown_value(name)}"
                         f"{did_you_mean(name, list_models())}; "
                         f"allowed: {', '.join(list_models())}")
    defaults = model_defaults(name)
    options = {k: v for k, v in raw.items() if k != "name"}
    for key, value in options.items():
        if key not in defaults:
            raise ValueError(f"unknown config key model.{shown_name(key)} for model {name!r}"
                             f"{did_you_mean(key, defaults)}; "
                             f"allowed: name, {', '.join(sorted(defaults))}")
        default = defaults[key]
        if default is not None:  # the default's type is the declared type; None-defaults are checked by the model
            options[key] = _check_type(f"model.{key}", value, type(default))
    return ModelConfig(name=name, options=options)


def _type_name(tp: Any) -> str:
    if isinstance(tp, UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        return f"a list of {len(args)} {_type_name(args[0])}s"
    return {NoneType: "null", float: "number"}.get(tp, getattr(tp, "__name__", str(tp)))


def _check_type(key: str, value: Any, tp: Any) -> Any:
    """``value`` converted to ``tp`` where that is lossless (int -> float, list -> tuple), else ``ValueError``."""
    if isinstance(tp, UnionType):
        for arg in typing.get_args(tp):
            try:
                return _check_type(key, value, arg)
            except ValueError:
                continue
        raise ValueError(f"config key {key}: expected {_type_name(tp)}, got {shown_value(value)} "
                         f"({type(value).__name__})")
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if isinstance(value, (list, tuple)) and len(value) == len(args):
            return tuple(_check_type(f"{key}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args, strict=True)))
    elif tp is NoneType:
        if value is None:
            return None
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and _finite_float(value):
            return float(value)
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is bool or tp is str:
        if isinstance(value, tp):
            return value
    else:
        return value
    raise ValueError(f"config key {key}: expected {_type_name(tp)}, got {shown_value(value)} ({type(value).__name__})")


def _finite_float(value: int | float) -> bool:
    """Whether ``value`` is a finite float or an int that a float can hold (a 400-digit int cannot)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _describe_range(meta: dict[str, Any]) -> str:
    low, high = (_bound(meta["low"]), _bound(meta["high"]))
    if low is not None and high is not None:
        return f"in {'(' if meta['low_open'] else '['}{low}, {high}{')' if meta['high_open'] else ']'}"
    if low is not None:
        return f"{'>' if meta['low_open'] else '>='} {low}"
    return f"{'<' if meta['high_open'] else '<='} {high}"


def _bound(value: float | None) -> str | None:
    """A range's end as written: an int exactly (a seed's 9223372036854775807, not 9.22337e+18), a float short."""
    if value is None:
        return None
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else f"{value:g}"


def _check_allowed(key: str, value: Any, meta: dict[str, Any]) -> None:
    if value is None:
        return
    if meta.get("choices") is not None and value not in meta["choices"]:
        hint = did_you_mean(value, [c for c in meta["choices"] if isinstance(c, str)])
        raise ValueError(f"config key {key}: {shown_value(value)} is not allowed{hint}; allowed: "
                         f"{', '.join(meta['choices'])}")
    if meta.get("low") is None and meta.get("high") is None:
        return
    for item in value if isinstance(value, tuple) else (value,):
        too_low = meta["low"] is not None and (item <= meta["low"] if meta["low_open"] else item < meta["low"])
        too_high = meta["high"] is not None and (item >= meta["high"] if meta["high_open"] else item > meta["high"])
        if too_low or too_high:
            raise ValueError(f"config key {key}: {shown_value(_plain(value))} is out of range; allowed: "
                             f"{_describe_range(meta)}")
