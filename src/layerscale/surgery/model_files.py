"""Write the model that ``layerscale grow`` / ``layerscale prune`` edited, atomically. SOURCE is read by the one
resolver of every command, :func:`layerscale.sources.read_source` (a training run, our / timm / Hugging Face model
folder, or a folder these commands wrote).

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
from pathlib import Path
from typing import Any

from torch import nn

from ..destinations import check_writable_dir
from ..sources import TRAIN_CONFIG_NAME, SourceModel, read_source
from ..sources.model_folder import quiet_transformers as _quiet_transformers
from .growth.new_blocks import NEW_BLOCKS_KEY, new_block_indices

__all__ = ["SourceModel", "read_source_model", "write_model_folder", "check_destination_folder", "run_of_checkpoint",
           "processor_file_contents", "tokenizer_file_contents", "TRAIN_CONFIG_NAME"]

#: The reader of every source (:func:`layerscale.sources.read_source`), under the name surgery has always used.
read_source_model = read_source


def check_destination_folder(dest: str | os.PathLike, force: bool, source: str | os.PathLike | None = None) -> Path:
    """Refuse (before any work) a DEST that exists and is not an empty folder without ``force``, a DEST that is
    the source, holds it or lies inside it (replacing DEST would delete the source or part of it, even with
    ``force``), or one that cannot be written. A checkpoint directory (or a file in one) of a training run counts
    as its whole run: DEST inside ``RUN/checkpoints/`` could be taken for a checkpoint (``step_N``) when the run is
    resumed or analysed."""
    dest = Path(dest)
    if source is not None:
        target, origin = dest.resolve(), Path(source).resolve()
        run = run_of_checkpoint(origin)
        if target == origin:
            raise ValueError(f"--out {dest} is the source itself; write the edited model to another folder")
        if target in origin.parents:
            raise ValueError(f"--out {dest} holds the source {source}; replacing it would delete the source: write "
                             "the edited model to another folder")
        if (run or origin) in (target, *target.parents):
            where = f"the run {run} of the source {source}" if run else f"the source {source}"
            raise ValueError(f"--out {dest} lies inside {where}; writing there could replace the source's own files "
                             "(its checkpoints): write the edited model outside it")
    if dest.exists():
        if not dest.is_dir():
            raise FileExistsError(f"{dest} exists and is not a folder")
        if any(dest.iterdir()) and not force:
            raise FileExistsError(f"{dest} exists and is not empty; use --force to replace it")
    return check_writable_dir(dest, "model folder")


def run_of_checkpoint(origin: Path) -> Path | None:
    """The training run (``config.yaml`` + ``checkpoints/``) whose checkpoint directory ``origin`` is or holds,
    else ``None``."""
    from ..diagnostics.run_data import CONFIG_FILE
    from ..train.state.checkpoint import CHECKPOINT_DIR

    checkpoint = origin.parent if origin.is_file() else origin
    run = checkpoint.parent.parent
    return run if checkpoint.parent.name == CHECKPOINT_DIR and (run / CONFIG_FILE).is_file() else None


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
    image = getattr(model, "main_input_name", None) == "pixel_values"
    auto = "AutoModelForImageClassification" if image else "AutoModelForCausalLM"
    if scaled:
        module = "hf_vision" if image else "hf_causal_lm"
        return [f"layerscale.integrations.{module}.from_pretrained_with_layerscale({auto}, DEST) "
                "(plain from_pretrained refuses the folder: its model_type is marked <type>_layerscale, "
                "docs/growth.md; --fold writes a model that plain from_pretrained loads)"]
    return [f"{auto}.from_pretrained(DEST)"]


def processor_file_contents(source: SourceModel) -> dict[str, bytes]:
    """The image processor's ``preprocessor_config.json`` of a Hugging Face source folder (name → bytes, read
    without following links and bounded in size), so the edited image model keeps the normalisation its inputs
    get; empty for other sources."""
    from ..sources.image_processor import PROCESSOR_FILE
    from ..sources.model_folder import MAX_CONFIG_BYTES
    from ..untrusted_files import read_regular_file

    path = source.path / PROCESSOR_FILE
    if source.library != "transformers" or not source.path.is_dir() or not (path.exists() or path.is_symlink()):
        return {}
    return {PROCESSOR_FILE: read_regular_file(path, MAX_CONFIG_BYTES)}


def tokenizer_file_contents(folder: str | os.PathLike | None) -> dict[str, bytes]:
    """The tokenizer files of a source folder (:data:`~layerscale.sources.model_folder.TOKENIZER_FILES`), name →
    bytes, read without following links and bounded in size, so the edited model's folder keeps its tokenizer."""
    from ..sources.model_folder import tokenizer_files
    from ..untrusted_files import read_regular_file

    if folder is None or not Path(folder).is_dir():
        return {}
    return {path.name: read_regular_file(path, MAX_TOKENIZER_FILE_BYTES)
            for path in tokenizer_files(Path(folder))}


#: A tokenizer file larger than this is refused (the largest real ones, multilingual tokenizer.json, are ~35 MB).
MAX_TOKENIZER_FILE_BYTES = 256 << 20


def write_model_folder(model: nn.Module, library: str, dest: str | os.PathLike, *, surgery: dict[str, Any],
                       extra_files: dict[str, str | bytes] | None = None) -> list[str]:
    """Write ``model`` into the folder ``dest`` in ``library``'s layout, with ``surgery`` (what was done) and the
    model's new-block record in ``config.json`` (and, for timm, in ``pretrained_cfg``: :mod:`.new_blocks`);
    ``extra_files`` (name → text or bytes: the training config, the source's tokenizer files) beside it. Atomic:
    built in a temporary folder, then renamed over ``dest``. Returns how to load it (lines for the user)."""
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
        for name, content in (extra_files or {}).items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            (tmp / name).write_bytes(data)
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
