"""One resolver for every model source of ``layerscale analyze``, ``prune`` and ``grow``.

SOURCE is one of

* a **training run** of ``layerscale train``: its run directory (latest checkpoint), one of its checkpoint
  directories, or a weights file (safetensors, or PyTorch read with ``weights_only=True``) with ``config=`` the
  training config that builds it (:mod:`~layerscale.sources.run_model`);
* **our model folder** (``save_pretrained``; what ``prune`` / ``grow`` write from our models) — with the
  ``train.yaml`` those commands write beside a model that came from a run, it carries that run's config and data;
* a **timm folder** (``save_for_hf``: ``config.json`` with ``architecture`` and ``pretrained_cfg``);
* a **Hugging Face folder** (``config.json`` with ``model_type``, one weights file or shards with their index, and
  the tokenizer files when the model has a tokenizer): a causal language model, or an image classifier (ViT, DeiT,
  DINOv2) with its image processor's ``preprocessor_config.json`` when it was saved with one.

Every folder ``prune`` and ``grow`` write is one of the last three. The model is refused, naming the first offending
tensor, when a weight is NaN or infinite (:mod:`~layerscale.sources.finite`). Errors are ``FileNotFoundError``
(nothing there), ``ImportError`` (a peer library missing) or a one-line ``ValueError``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from .finite import check_finite_model
from .model_folder import folder_kind, read_model_folder, tokenizer_files

__all__ = ["SourceModel", "read_source", "TRAIN_CONFIG_NAME"]

#: The training config ``prune`` / ``grow`` write beside a model that came from a training run.
TRAIN_CONFIG_NAME = "train.yaml"


@dataclass
class SourceModel:
    """The model read from ``path``: ``library`` is ``"layerscale"``, ``"timm"`` or ``"transformers"``; ``run``
    the :class:`~layerscale.sources.run_model.RunModel` when its training config is known (a run, or one of our
    folders with ``train.yaml``); ``tokenizer`` the folder holding its tokenizer files, if any."""

    model: nn.Module
    library: str
    path: Path
    run: Any = None
    tokenizer: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def is_language_model(self) -> bool:
        """A causal language model (Hugging Face, or our GPT): it reads token ids. A Hugging Face model says so by
        its ``main_input_name`` (``"input_ids"``; an image classifier's is ``"pixel_values"``)."""
        if self.library == "transformers":
            return getattr(self.model, "main_input_name", None) == "input_ids"
        return hasattr(self.model, "vocab_size")


def _run_of_folder(model: nn.Module, folder: Path) -> Any:
    """The :class:`RunModel` of our folder with ``train.yaml``, or ``None``."""
    from ..train.config.schema import TrainConfig
    from .run_model import RunModel

    path = folder / TRAIN_CONFIG_NAME
    if not path.is_file() or path.is_symlink():
        return None
    cfg = TrainConfig.from_file(path)
    model_args = dict(model.hub_config()) if hasattr(model, "hub_config") else {}
    return RunModel(model, cfg, folder / "model.safetensors", model_args)


def _read(path: Path, config: str | os.PathLike | None) -> SourceModel:
    kind, folder_config = folder_kind(path) if path.is_dir() else (None, None)
    if kind is not None:
        if config is not None:
            raise ValueError(f"--config is for a weights file; {path} is a {kind} model folder with its own "
                             "config.json")
        model = read_model_folder(path, kind, folder_config)
        run = _run_of_folder(model, path) if kind == "layerscale" else None
        tokenizer = path if tokenizer_files(path) else None
        return SourceModel(model, kind, path, run=run, tokenizer=tokenizer)
    from .run_model import load_run_model

    run = load_run_model(path, config)
    return SourceModel(run.model, "layerscale", path, run=run)


def read_source(source: str | os.PathLike, config: str | os.PathLike | None = None) -> SourceModel:
    """The model in ``source`` (module docstring), in eval mode, with finite weights."""
    path = Path(source)
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(f"{path}: no such model folder, run directory or weights file")
    if path.is_symlink():
        raise ValueError(f"{path}: is a symbolic link; links are not followed (give the folder or file itself)")
    try:
        found = _read(path, config)
    except (ValueError, FileNotFoundError, ImportError):
        raise
    except Exception as exc:  # a library's own error for a file it cannot read: one line naming the source
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ValueError(f"cannot read {path}: {type(exc).__name__}: {reason}") from None
    check_finite_model(found.model, str(path))
    return found
