"""What a Hugging Face folder may hold, and whether the model transformers read from it is that folder's model.

Before the load (:func:`check_model_folder_files`): a PEFT adapter (``adapter_config.json``) is refused — with
``peft`` installed ``from_pretrained`` applies it over ``model.safetensors`` without a word, so the model read would
be neither the base checkpoint nor a merged one; and the JSON files transformers reads for a causal LM
(``config.json``, ``generation_config.json``) are bounded (:data:`~layerscale.untrusted_files.MAX_CONFIG_BYTES`)
before it reads them whole.

After the load (:func:`check_model_as_saved`): the model, mapped back to the names its checkpoint uses
(transformers' own ``revert_weight_conversion``, what ``save_pretrained`` applies), must hold exactly the
checkpoint's tensors (:func:`~layerscale.weight_checks.check_loaded_as_saved`), read as
:func:`~.shard_index.checkpoint_tensors` reads them. Entries transformers computes rather than loads (its
``_keys_to_ignore_on_load_missing`` / ``_keys_to_ignore_on_save`` patterns) and saved tensors it is declared to
ignore (``_keys_to_ignore_on_load_unexpected``) are the model class's own rules, applied as transformers applies them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...untrusted_files import MAX_CONFIG_BYTES, UntrustedFileError

__all__ = ["ADAPTER_CONFIG", "BOUNDED_JSON_FILES", "as_checkpoint_names", "check_model_as_saved",
           "check_model_folder_files"]

#: the file that makes ``from_pretrained`` load a PEFT adapter from the folder
ADAPTER_CONFIG = "adapter_config.json"
#: the JSON files transformers reads whole while loading a causal LM, bounded first
BOUNDED_JSON_FILES = ("config.json", "generation_config.json")


def check_model_folder_files(folder: Path) -> None:
    """One-line :class:`~layerscale.untrusted_files.UntrustedFileError` for a folder holding a PEFT adapter or a
    JSON file of :data:`BOUNDED_JSON_FILES` larger than ``MAX_CONFIG_BYTES`` (module docstring)."""
    if (folder / ADAPTER_CONFIG).exists() or (folder / ADAPTER_CONFIG).is_symlink():
        raise UntrustedFileError(f"{folder}: holds a PEFT adapter ({ADAPTER_CONFIG}), which transformers would "
                                 "apply over the base weights; merge it first (peft: model.merge_and_unload(), then "
                                 "save_pretrained) or give a folder without the adapter files")
    for name in BOUNDED_JSON_FILES:
        path = folder / name
        if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
            raise UntrustedFileError(f"{path}: {path.stat().st_size} bytes; expected at most {MAX_CONFIG_BYTES} "
                                     "for a model's JSON configuration")


def _patterns(model: Any, *attributes: str) -> list[re.Pattern]:
    return [re.compile(pattern) for attribute in attributes for pattern in (getattr(model, attribute, None) or ())]


def as_checkpoint_names(model: Any, state: dict) -> dict:
    """``state`` under the names ``save_pretrained`` would write (transformers' ``revert_weight_conversion``, on
    releases that have it; before it, the names are the model's own)."""
    try:
        from transformers.core_model_loading import revert_weight_conversion
    except ImportError:
        return state
    return revert_weight_conversion(model, state)


def check_model_as_saved(model: Any, folder: Path) -> None:
    """One-line ``ValueError`` naming ``folder`` unless ``model`` (read from it by transformers, LayerScale added
    back) holds exactly the folder's checkpoint tensors (module docstring)."""
    from ...weight_checks import check_loaded_as_saved
    from .shard_index import checkpoint_tensors

    computed = _patterns(model, "_keys_to_ignore_on_load_missing", "_keys_to_ignore_on_save")
    ignored = _patterns(model, "_keys_to_ignore_on_load_unexpected")
    prefix = getattr(model, "base_model_prefix", "") or ""

    def may_skip(name: str) -> bool:
        return any(p.search(name) for p in computed + ignored)

    check_loaded_as_saved(as_checkpoint_names(model, dict(model.state_dict())), checkpoint_tensors(folder),
                          str(folder), prefix=f"{prefix}." if prefix else "", may_skip=may_skip)
