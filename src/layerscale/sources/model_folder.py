"""Model folders: ours (``save_pretrained``), timm (``save_for_hf``) and Hugging Face (``save_pretrained``, one
weights file or shards with their index), told apart by ``config.json``:

* ``"library": "torch-layerscale"`` — ours, read with ``VisionTransformer/CaiT/GPT.from_pretrained``;
* ``"model_type"`` — a Hugging Face causal LM or image classifier, read with ``AutoModelForCausalLM`` /
  ``AutoModelForImageClassification.from_pretrained`` by its model type (:func:`hf_auto_class_name`; a model saved
  with LayerScale keeps its scales: :func:`~layerscale.surgery.hf.hf_loader.from_pretrained_with_layerscale`);
* ``"architecture"`` with ``"pretrained_cfg"`` — timm, built with ``timm.create_model("local-dir:FOLDER")`` and
  filled strictly from its weights file (:mod:`layerscale.sources.timm_folder`).

``config.json`` is read with the one hostile-file reader (:mod:`layerscale.untrusted_files`: bounded, no link
followed, strict JSON) and the folder is refused when any entry is a link (:func:`check_no_links`), or, for a
sharded Hugging Face checkpoint, when its index names a shard that is not a file in the folder
(:mod:`layerscale.surgery.hf.shard_index`), before a library opens a weights file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torch import nn

from ..messages import shown_value
from ..untrusted_files import MAX_CONFIG_BYTES, UntrustedFileError, parse_json, read_regular_file, regular_files

__all__ = ["check_no_links", "hub_snapshot_repo", "MAX_CONFIG_BYTES", "folder_kind", "hf_auto_class_name",
           "our_model_classes", "read_model_folder", "quiet_transformers", "TOKENIZER_FILES", "tokenizer_files"]

#: The files of a Hugging Face tokenizer (``save_pretrained`` of a tokenizer), copied into edited model folders.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "tokenizer.model", "added_tokens.json", "chat_template.jinja")



def hub_snapshot_repo(folder: Path) -> str | None:
    """``org/name`` when ``folder`` is a snapshot in a Hugging Face Hub cache (``models--org--name/snapshots/REV``,
    huggingface_hub's layout, whose files are links into the repository's ``blobs/``); else ``None``."""
    parent, repo = folder.parent, folder.parent.parent.name
    if parent.name != "snapshots" or not repo.startswith("models--"):
        return None
    return repo[len("models--"):].replace("--", "/")


def check_no_links(folder: Path, what: str = "model folder") -> list[str]:
    """The regular files directly in ``folder``; :class:`~layerscale.untrusted_files.UntrustedFileError` (one
    line) when ``folder`` or any entry in it is a symbolic link, so no library reading it afterwards follows one. A
    Hub cache snapshot (:func:`hub_snapshot_repo`) is refused the same way, the line saying how to get the folder
    with its files in place."""
    files, other = regular_files(folder)
    for name in other:
        if (folder / name).is_symlink():
            repo = hub_snapshot_repo(folder)
            how = (f"; this is a Hugging Face Hub cache snapshot, whose files are links into the cache: download "
                   f"the files themselves (hf download {repo} --local-dir DIR) or copy them (cp -rL {folder} DIR) "
                   f"and give DIR") if repo else ""
            raise UntrustedFileError(f"{folder / name}: refused (a symbolic link inside the {what}); links are "
                                     f"not followed{how}")
    return files


def folder_kind(folder: Path) -> tuple[str | None, dict | None]:
    """``(kind, config)``: kind ``"layerscale"``, ``"transformers"``, ``"timm"`` or ``None`` (no ``config.json``, or
    one of none of these), and the parsed ``config.json`` (``None`` when absent)."""
    path = folder / "config.json"
    if not path.exists() and not path.is_symlink():
        return None, None
    check_no_links(folder)
    config = parse_json(read_regular_file(path, MAX_CONFIG_BYTES), str(path))
    if config.get("library") == "torch-layerscale":
        return "layerscale", config
    if "model_type" in config:
        return "transformers", config
    if "architecture" in config and "pretrained_cfg" in config:
        return "timm", config
    return None, config


def tokenizer_files(folder: Path) -> list[Path]:
    """The tokenizer files (:data:`TOKENIZER_FILES`) present in ``folder``."""
    return [folder / name for name in TOKENIZER_FILES if (folder / name).is_file()]


def our_model_classes() -> dict[str, type]:
    """The classes of our model folders by the ``architecture`` name their ``config.json`` gives."""
    from ..models.cait import CaiT
    from ..models.gpt import GPT
    from ..models.vit import VisionTransformer

    return {cls.__name__: cls for cls in (VisionTransformer, CaiT, GPT)}


def _ours(folder: Path, config: dict) -> nn.Module:
    classes = our_model_classes()
    name = config.get("architecture")
    if name not in classes:
        raise ValueError(f"{folder}: config.json describes a {name!r}; this reads {', '.join(classes)}")
    return classes[name].from_pretrained(folder)


def hf_auto_class_name(folder: Path, config: dict) -> str:
    """The transformers Auto class a Hugging Face folder is read with, by its (unmarked) ``model_type``:
    ``AutoModelForCausalLM`` for a causal language model, ``AutoModelForImageClassification`` for an image
    classifier (ViT, DeiT, DINOv2, ...); a one-line ``ValueError`` for any other type (a DistilBERT or T5 folder):
    transformers' own refusal lists every type it knows, thousands of characters."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES)

    from ..surgery.hf.hf_layerscale_config import base_model_type

    model_type = config.get("model_type")
    base = base_model_type(model_type) if isinstance(model_type, str) else None
    if base in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "AutoModelForCausalLM"
    if base in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES:
        return "AutoModelForImageClassification"
    raise ValueError(f"{folder}: a Hugging Face {shown_value(model_type)} model; model folders of Hugging Face are "
                     "read as causal language models (AutoModelForCausalLM) or image classifiers "
                     "(AutoModelForImageClassification): give another model to layerscale.analysis.analyze_depth "
                     "from Python")


def _transformers(folder: Path, config: dict) -> nn.Module:
    try:
        import transformers
    except ImportError:
        raise ImportError(f"{folder} is a Hugging Face model folder; reading it needs transformers: "
                          f"pip install 'torch-layerscale[hf]'") from None
    from ..surgery.hf.hf_loader import from_pretrained_with_layerscale
    from ..surgery.hf.shard_index import checked_shard_names

    checked_shard_names(folder)  # a shard name outside the folder is refused before transformers joins it
    auto_class = getattr(transformers, hf_auto_class_name(folder, config))
    with quiet_transformers():
        return from_pretrained_with_layerscale(auto_class, folder).eval()


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars from transformers while reading or writing (the commands print one summary)."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def read_model_folder(folder: Path, kind: str, config: dict) -> nn.Module:
    """The model in ``folder`` of ``kind`` (from :func:`folder_kind`), in eval mode."""
    if kind == "layerscale":
        return _ours(folder, config)
    if kind == "timm":
        from .timm_folder import read_timm_folder

        return read_timm_folder(folder)
    return _transformers(folder, config)
