"""The part of ``layerscale grow`` and ``layerscale prune`` after the edit: fold if asked, write DEST with
``train.yaml`` for a model that came from a training run, and the lines telling how to load it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from .model_files import (TRAIN_CONFIG_NAME, SourceModel, processor_file_contents, tokenizer_file_contents,
                          write_model_folder)

__all__ = ["finish_write", "train_config_text"]


def train_config_text(model: nn.Module, run: Any, dest: Path) -> str:
    """The source run's config with the model's new constructor arguments (depth, residual, ls_placement) and
    ``run.init_from: DEST`` (absolute), ``run.out_dir`` cleared: the config that trains the edited model."""
    from ..train.config.config_file import dump_config

    raw = run.config.to_dict()
    args = model.__dict__.get("_init_kwargs", {})
    for key in ("depth", "residual", "ls_placement"):
        if key in args:
            raw["model"][key] = args[key]
    raw["run"]["init_from"] = str(dest.resolve())
    raw["run"]["out_dir"] = None
    return dump_config(raw)


def finish_write(model: nn.Module, source: SourceModel, dest: Path, surgery: dict[str, Any], *,
                 fold: bool = False) -> list[str]:
    """Write ``model`` to ``dest`` (see :func:`~layerscale.surgery.model_files.write_model_folder`) with the source's
    tokenizer files and image processor's config, so the folder is a complete source again; returns the lines to
    print."""
    if fold:
        from .folding.fold import fold_layerscale

        from .block_list import block_family

        fold_layerscale(model)
        block_family(model).keep_folded_loadable(model)
        surgery = {**surgery, "folded": True}
    extra = {TRAIN_CONFIG_NAME: train_config_text(model, source.run, dest)} if source.run is not None else {}
    companions = {**tokenizer_file_contents(source.tokenizer), **processor_file_contents(source)}
    how = write_model_folder(model, source.library, dest, surgery=surgery, extra_files={**companions, **extra})
    lines = [f"wrote {dest}; load it with {how[0]}", *how[1:]]
    if extra:
        only_new = " [--set optim.trainable=new_blocks]" if surgery.get("operation") == "grow" else ""
        lines.append(f"train it: layerscale train --config {dest / TRAIN_CONFIG_NAME} --out RUN_DIR{only_new}")
    return lines
