"""Where ``--config`` / ``run(config=...)`` reads from: a file path, or the name of a config packaged with
torch-layerscale (``vit_digits``, ``cait_cifar10``, ...), so a ``pip install``-ed package trains without the
repository. The packaged files are ``layerscale/configs/*.yaml`` (package data); print one with
``layerscale train --config NAME --print-config`` to copy and edit it. A config file holds at least one section:
an empty file (or one of comments only, or ``{}``) is refused (:func:`load_config_source`), not trained on every
default.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ...messages import shown_name
from ...suggest import did_you_mean

__all__ = ["load_config_source", "packaged_config_names", "resolve_config_path"]

_SUFFIXES = (".yaml", ".yml", ".json")


def _packaged_folder() -> Path:
    return Path(str(resources.files("layerscale").joinpath("configs")))


def packaged_config_names() -> list[str]:
    """The names of the configs packaged with torch-layerscale, sorted (``["cait_cifar10", ...]``)."""
    folder = _packaged_folder()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def resolve_config_path(config: str | os.PathLike) -> Path:
    """The file ``config`` names: an existing path as it is; otherwise a bare name (no suffix, no folder) of a
    packaged config. Anything else is a ``FileNotFoundError`` naming the path and the packaged names."""
    path = Path(config)
    if path.exists():
        return path
    text = str(config)
    names = packaged_config_names()
    if path.suffix.lower() not in _SUFFIXES and len(path.parts) == 1 and text in names:
        return _packaged_folder() / f"{text}.yaml"
    stem = path.stem if path.suffix.lower() in _SUFFIXES else text
    hint = did_you_mean(stem, names)
    if stem in names:
        hint = f" (the packaged config is --config {stem})"
    raise FileNotFoundError(f"{text}: config file not found, and not the name of a packaged config{hint}; "
                            f"packaged: {', '.join(names)}")


def load_config_source(config: str | os.PathLike) -> dict:
    """The mapping of the config ``config`` names (:func:`resolve_config_path`, read by
    :func:`~layerscale.train.config.config_file.load_config_file`). A file that holds no section (empty, only
    comments, or ``{}``) is a one-line ``ValueError`` naming it: a run would otherwise train on every default without
    a word about it."""
    from .config_file import load_config_file

    path = resolve_config_path(config)
    raw = load_config_file(path)
    if not raw:
        raise ValueError(f"{shown_name(path)}: the config file holds no section (it is empty, only comments or {{}}); "
                         "expected at least one section, e.g. model:, data: or optim: (see layerscale train --config "
                         "vit_digits --print-config)")
    return raw
