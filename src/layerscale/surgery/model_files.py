"""Read the model that ``layerscale grow`` / ``layerscale prune`` edit, and write the edited model atomically.

SOURCE is one of

* a run directory of ``layerscale train`` (its latest checkpoint), one of its checkpoint directories, or a weights
  file with ``--config`` (:func:`layerscale.analysis.source.load_run_model` rebuilds the model as trained);
* a folder written by our ``save_pretrained`` (``config.json`` with ``"library": "torch-layerscale"``);
* a timm folder (``config.json`` with ``architecture`` and ``pretrained_cfg``, written by timm's ``save_for_hf``),
  read with ``timm.create_model("local-dir:SOURCE", pretrained=True)``;
* a Hugging Face causal-LM folder (``config.json`` with ``model_type``), read with ``from_pretrained`` (a model
  saved after :func:`~layerscale.add_layerscale` keeps its scales,
  :func:`~layerscale.integrations.hf_causal_lm.from_pretrained_with_layerscale`).

DEST is a folder in the same library's layout, so the plain library loads it at the new depth: ours with
``VisionTransformer/CaiT/GPT.from_pretrained(DEST)``, timm with ``timm.create_model("local-dir:DEST",
pretrained=True)`` (or the architecture name with ``depth=`` and the weights file), Hugging Face with
``from_pretrained(DEST)``. The whole folder is written into a temporary folder beside DEST and renamed into place:
DEST is either absent / its old version or the complete new one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ..destinations import check_writable_dir
from .new_blocks import NEW_BLOCKS_KEY, new_block_indices

__all__ = ["SourceModel", "read_source_model", "write_model_folder", "check_destination_folder"]

TRAIN_CONFIG_NAME = "train.yaml"


@dataclass
class SourceModel:
    """The model read from ``path``: ``library`` is ``"layerscale"``, ``"timm"`` or ``"transformers"``; ``run``
    the :class:`~layerscale.analysis.source.RunModel` when it came from a training run (its config and data)."""

    model: nn.Module
    library: str
    path: Path
    run: Any = None
    notes: list[str] = field(default_factory=list)


def _config_json(folder: Path) -> dict | None:
    path = folder / "config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    return config if isinstance(config, dict) else None


def _ours(folder: Path) -> nn.Module:
    from ..models.cait import CaiT
    from ..models.gpt import GPT
    from ..models.vit import VisionTransformer

    classes = {cls.__name__: cls for cls in (VisionTransformer, CaiT, GPT)}
    name = _config_json(folder).get("architecture")
    if name not in classes:
        raise ValueError(f"{folder}: config.json describes a {name!r}; depth surgery reads {', '.join(classes)}")
    return classes[name].from_pretrained(folder)


def _timm(folder: Path) -> nn.Module:
    try:
        import timm
    except ImportError:
        raise ImportError(f"{folder} is a timm model folder; reading it needs timm: pip install timm") from None
    return timm.create_model(f"local-dir:{folder.resolve()}", pretrained=True).eval()


def _transformers(folder: Path) -> nn.Module:
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise ImportError(f"{folder} is a Hugging Face model folder; reading it needs transformers: "
                          f"pip install 'torch-layerscale[hf]'") from None
    from ..integrations.hf_causal_lm import from_pretrained_with_layerscale

    with _quiet_transformers():
        return from_pretrained_with_layerscale(AutoModelForCausalLM, folder).eval()


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars from transformers while reading or writing (the commands print one summary)."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def read_source_model(source: str | os.PathLike, config: str | os.PathLike | None = None) -> SourceModel:
    """The model in ``source`` (see the module docstring). Raises ``FileNotFoundError`` when it does not exist,
    ``ImportError`` for a missing library, and a one-line ``ValueError`` for anything it cannot read."""
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such model folder, run directory or weights file")
    folder_config = _config_json(path) if path.is_dir() else None
    try:
        if folder_config is not None and folder_config.get("library") == "torch-layerscale":
            return SourceModel(_ours(path), "layerscale", path)
        if folder_config is not None and "model_type" in folder_config:
            return SourceModel(_transformers(path), "transformers", path)
        if folder_config is not None and "architecture" in folder_config and "pretrained_cfg" in folder_config:
            return SourceModel(_timm(path), "timm", path)
        from ..analysis.source import load_run_model

        run = load_run_model(path, config)
        return SourceModel(run.model, "layerscale", path, run=run)
    except (ValueError, FileNotFoundError, ImportError):
        raise
    except Exception as exc:  # a library's own error for a file it cannot read: one line naming the source
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ValueError(f"cannot read {path}: {type(exc).__name__}: {reason}") from None


def check_destination_folder(dest: str | os.PathLike, force: bool, source: str | os.PathLike | None = None) -> Path:
    """Refuse (before any work) a DEST that exists and is not an empty folder without ``force``, a DEST that is
    the source, or one that cannot be written."""
    dest = Path(dest)
    if source is not None and dest.resolve() == Path(source).resolve():
        raise ValueError(f"--out {dest} is the source itself; write the edited model to another folder")
    if dest.exists():
        if not dest.is_dir():
            raise FileExistsError(f"{dest} exists and is not a folder")
        if any(dest.iterdir()) and not force:
            raise FileExistsError(f"{dest} exists and is not empty; use --force to replace it")
    return check_writable_dir(dest, "model folder")


def _write_ours(model: nn.Module, folder: Path, extra: dict[str, Any]) -> list[str]:
    model.save_pretrained(folder)
    path = folder / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(extra)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    name = type(model).__name__
    return [f"from layerscale import {name}; {name}.from_pretrained('DEST')"]


def _write_timm(model: nn.Module, folder: Path, extra: dict[str, Any]) -> list[str]:
    """``save_for_hf`` into ``folder``. Refused (``ImportError``, one line) on timm < 1.0.31: before it, neither
    ``create_model`` nor ``save_for_hf`` records the model's constructor arguments (``model_args``: depth, image
    size, ``init_values``, ...), so ``create_model("local-dir:...")`` would rebuild the architecture's defaults, not
    this model. timm >= 1.0.31 is recognised by what it adds for that, ``timm.models.get_model_args``."""
    import timm
    from timm import models

    if not hasattr(models, "get_model_args"):
        raise ImportError(f"writing a timm model folder needs timm>=1.0.31 (timm {timm.__version__} does not record "
                          f"the model's constructor arguments, so the folder would not rebuild this model): "
                          f"pip install 'timm>=1.0.31'")
    models.save_for_hf(model, str(folder), model_config=dict(extra), safe_serialization=True)
    return ["timm.create_model('local-dir:DEST', pretrained=True)"]


def _write_transformers(model: nn.Module, folder: Path) -> list[str]:
    with _quiet_transformers():
        model.save_pretrained(folder)
    scaled = any(name.endswith(".layer_scale") for name, _ in model.named_parameters())
    if scaled:
        return ["layerscale.integrations.hf_causal_lm.from_pretrained_with_layerscale(AutoModelForCausalLM, DEST) "
                "(plain from_pretrained builds the new depth but drops the .layer_scale keys; --fold writes a "
                "model without them)"]
    return ["AutoModelForCausalLM.from_pretrained(DEST)"]


def write_model_folder(model: nn.Module, library: str, dest: str | os.PathLike, *, surgery: dict[str, Any],
                       extra_files: dict[str, str] | None = None) -> list[str]:
    """Write ``model`` into the folder ``dest`` in ``library``'s layout, with ``surgery`` (what was done) and the
    model's new-block record in ``config.json``; ``extra_files`` (name → text) beside it. Atomic: built in a
    temporary folder, then renamed over ``dest``. Returns how to load it (lines for the user)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    extra: dict[str, Any] = {"layerscale_surgery": surgery}
    new = new_block_indices(model)
    if new is not None:
        extra[NEW_BLOCKS_KEY] = list(new)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    old = None
    try:
        if library == "layerscale":
            how = _write_ours(model, tmp, extra)
        elif library == "timm":
            how = _write_timm(model, tmp, extra)
        else:
            config = model.config
            setattr(config, "layerscale_surgery", surgery)
            how = _write_transformers(model, tmp)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o777 & ~_umask())
        if dest.exists():
            old = dest.parent / f".{dest.name}.old-{os.getpid()}"
            os.replace(dest, old)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not dest.exists():
            os.replace(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return [line.replace("DEST", str(dest)) for line in how]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
