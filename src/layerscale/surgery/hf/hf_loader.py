"""Load a Hugging Face model (a causal LM or a ViT) that was saved after :func:`layerscale.add_layerscale`, γ
included, bit for bit: :func:`from_pretrained_with_layerscale` (any class, ``AutoModelForCausalLM``,
``AutoModelForImageClassification`` or concrete) is the usual ``from_pretrained`` for everything else, then the
scales ``add_layerscale`` creates, added back and filled from the checkpoint.

The saved folder holds the scales beside the other weights (keys ``...c_proj.layer_scale`` /
``...o_proj.layer_scale`` / ``...down_proj.layer_scale``, a ViT's ``...attention.output.dense.layer_scale`` /
``...output.dense.layer_scale``; :data:`SCALE_KEY_SUFFIX`) and ``config.json`` with ``model_type``
``<type>_layerscale`` (:mod:`layerscale.surgery.hf.hf_layerscale_config`). The loader lives here, with the surgery
that writes such folders, so that the one source resolver (:mod:`layerscale.sources.model_folder`) reads them
without climbing to :mod:`layerscale.integrations`; :mod:`layerscale.integrations.hf_causal_lm` and
:mod:`layerscale.integrations.hf_vision` re-export it and register transformers' Auto classes for the same
folders.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

__all__ = ["SCALE_KEY_SUFFIX", "from_pretrained_with_layerscale"]

SCALE_KEY_SUFFIX = ".layer_scale"


def _local_folder(name: str | os.PathLike, **download: Any) -> Path:
    path = Path(name)
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ImportError(f"{name} is not a local folder; downloading it needs huggingface_hub: "
                          f"pip install 'torch-layerscale[hf]'") from None
    try:
        return Path(snapshot_download(repo_id=str(name), allow_patterns=["*.json", "*.safetensors"], **download))
    except Exception as exc:  # offline, unknown repo, bad id: one line naming it
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise FileNotFoundError(f"{name}: not a local folder, and the Hugging Face Hub repo could not be fetched "
                                f"({type(exc).__name__}: {reason})") from None


def _scale_tensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every ``*.layer_scale`` tensor of the checkpoint in ``folder`` (single file or sharded safetensors, as
    :func:`~.shard_index.checkpoint_tensors` reads them)."""
    from .shard_index import checkpoint_tensors

    return dict(checkpoint_tensors(folder, keep=lambda name: name.endswith(SCALE_KEY_SUFFIX)))


def _saved_config(folder: Path) -> dict[str, Any] | None:
    """``folder``'s ``config.json`` as a JSON object (``None`` when absent), read bounded and nested at most
    :data:`~layerscale.untrusted_files.MAX_JSON_DEPTH` levels (a Hub snapshot's file is a link into its cache:
    read through it); one-line :class:`~layerscale.untrusted_files.UntrustedFileError` otherwise."""
    from ...untrusted_files import MAX_CONFIG_BYTES, parse_json, read_regular_file

    path = folder / "config.json"
    if not path.exists():
        return None
    return parse_json(read_regular_file(path.resolve(), MAX_CONFIG_BYTES), str(path), finite=False)


def _saved_model_type(folder: Path) -> Any:
    saved = _saved_config(folder)
    return saved.get("model_type") if saved is not None else None


def _is_marked_folder(folder: Path) -> bool:
    """Whether ``folder``'s ``config.json`` carries the mark of a model holding γ (``<type>_layerscale``)."""
    from .hf_layerscale_config import base_model_type

    saved_type = _saved_model_type(folder)
    return isinstance(saved_type, str) and base_model_type(saved_type) != saved_type


def _unmarked_config(folder: Path):
    """The saved config, of the model type it had before ``add_layerscale`` marked it; ``None`` for a config
    without the mark (plain ``from_pretrained`` reads it)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from .hf_layerscale_config import GUARD_KEY, LOADER_KEY, base_model_type

    path = folder / "config.json"
    saved = _saved_config(folder)
    if saved is None:
        raise FileNotFoundError(f"{path}: missing; save the model with save_pretrained")
    saved_type = saved.get("model_type")
    if not isinstance(saved_type, str) or base_model_type(saved_type) == saved_type:
        return None
    base = base_model_type(saved_type)
    if base not in CONFIG_MAPPING:
        raise ValueError(f"{path}: model type {saved_type!r} marks LayerScale on a {base!r} model, which this "
                         f"transformers release does not know")
    for key in (LOADER_KEY, GUARD_KEY, "model_type"):  # the mark; the class's own model_type applies
        saved.pop(key, None)
    return CONFIG_MAPPING[base].from_dict(saved)


def _check_fits_memory(model_class: Any, folder: Path, kwargs: dict[str, Any]) -> None:
    """A one-line ``ValueError`` when the model ``folder``'s config describes needs more than this machine's memory
    for its weights (in the dtype it is loaded in: ``dtype`` / ``torch_dtype``, else the config's, else float32),
    found on the ``meta`` device before transformers allocates it: a hostile ``config.json``'s sizes
    (``num_hidden_layers``, ``hidden_size``) are not bounded by the weights files, whose missing tensors
    transformers would initialise."""
    from ...models.validation import check_fits_memory

    config = kwargs.get("config")
    if config is None:
        from transformers import AutoConfig

        config = getattr(model_class, "config_class", None) or AutoConfig
        config = config.from_pretrained(folder)
    dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
    if dtype is None or dtype == "auto":
        dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    dtype = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    build = getattr(model_class, "from_config", None) or model_class._from_config
    check_fits_memory(lambda: build(config), f"{folder / 'config.json'}: its model", "loading it", 1, "the weights",
                      dtype if isinstance(dtype, torch.dtype) else None)


def _size_mismatch_line(model_class: Any, folder: Path, kwargs: dict) -> str:
    """One line naming the tensors whose shape in the checkpoint differs from the model ``config.json`` describes
    (transformers' own list, from a second load that keeps going past them; the model it builds is dropped)."""
    retry = {**kwargs, "output_loading_info": True, "ignore_mismatched_sizes": True}
    _, info = model_class.from_pretrained(folder, **retry)
    mismatched = sorted(info.get("mismatched_keys") or (), key=str)
    shown = "; ".join(f"{item[0]}: checkpoint {tuple(item[1])} vs config {tuple(item[2])}"
                      if isinstance(item, (tuple, list)) and len(item) == 3 else str(item) for item in mismatched[:3])
    more = f" (+{len(mismatched) - 3} more)" if len(mismatched) > 3 else ""
    return (f"{folder}: the weights do not fit its config.json: {len(mismatched)} tensor(s) of another shape "
            f"[{shown}]{more}; the config and the weights describe different models")


def _scales_by_checkpoint_name(model: Any) -> dict[str, torch.nn.Parameter]:
    """``model``'s scales under the names ``save_pretrained`` writes them (transformers >= 5.9 saves a ViT under its
    older layer names: ``vit.layers.0.attention.o_proj.layer_scale`` is written as
    ``vit.encoder.layer.0.attention.output.dense.layer_scale``; transformers' own ``revert_weight_conversion``,
    :func:`~.loaded_as_saved.as_checkpoint_names`). A conversion that would give anything but the parameters
    themselves under new names (a merge or a split) is a ``ValueError``: their values could not be filled."""
    from .loaded_as_saved import as_checkpoint_names

    own = {name: p for name, p in model.named_parameters() if name.endswith(SCALE_KEY_SUFFIX)}
    renamed = as_checkpoint_names(model, dict(own))
    ids = {id(p) for p in own.values()}
    if len(renamed) != len(own) or any(id(t) not in ids for t in renamed.values()):
        raise ValueError(f"{type(model).__name__}: transformers saves its LayerScale scales by another conversion "
                         f"than a renaming ({len(own)} scales, {len(renamed)} saved tensors); not supported")
    return renamed


def from_pretrained_with_layerscale(model_class: Any, pretrained_model_name_or_path: str | os.PathLike,
                                    **kwargs: Any):
    """``model_class.from_pretrained(path, **kwargs)`` for a checkpoint saved after ``add_layerscale``.

    ``model_class`` is a transformers class (``GPT2LMHeadModel``, ``LlamaForCausalLM``, ``AutoModelForCausalLM``,
    ...). Without scale keys in the checkpoint this is plain ``from_pretrained``. With them, every scale that
    ``add_layerscale`` creates must be in the checkpoint and every scale in the checkpoint must have been created
    (same names); otherwise ``ValueError`` lists the difference and no model is returned. A ``config.json`` marked
    by ``add_layerscale`` (model type ``<type>_layerscale``) whose checkpoint holds no scale keys is a
    ``ValueError`` (γ dropped), and so is any other key the model has and the checkpoint lacks, or the checkpoint
    has and the model lacks (transformers would leave the first at its random initialisation, with a warning, and
    ignore the second): the load report of ``output_loading_info`` is read, and returned with the model when that
    argument is given. Before the load, a folder holding a PEFT adapter, both a single file and a shard index, or
    an oversized JSON configuration is refused; after it, the model must hold exactly the checkpoint's tensors
    (:mod:`.loaded_as_saved`): a weight transformers cast from an integer dtype, took from a second copy or left
    at its initialisation is a ``ValueError`` naming it. transformers' own load report is not printed (what it
    lists is refused here, in one line).
    """
    from transformers.utils import logging as hf_logging

    from ..retrofit import add_layerscale

    from .loaded_as_saved import check_model_as_saved, check_model_folder_files

    download = {k: kwargs[k] for k in ("revision", "cache_dir", "local_files_only", "token") if k in kwargs}
    folder = _local_folder(pretrained_model_name_or_path, **download)
    check_model_folder_files(folder)
    scales = _scale_tensors(folder)
    if not scales and _is_marked_folder(folder):
        raise ValueError(f"{folder / 'config.json'}: marked as holding LayerScale γ (model type "
                         f"{_saved_model_type(folder)!r}) but the checkpoint has no *{SCALE_KEY_SUFFIX} keys: "
                         f"expected one per branch output, as add_layerscale writes them")
    wants_info = kwargs.pop("output_loading_info", False)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report: what it lists is refused below, in one line
    try:
        config = _unmarked_config(folder) if "config" not in kwargs else None
        if config is not None:
            kwargs["config"] = config
        _check_fits_memory(model_class, folder, kwargs)
        try:
            model, info = model_class.from_pretrained(folder, output_loading_info=True, **kwargs)
        except RuntimeError as exc:  # transformers' size-mismatch error points at the report silenced above
            if "ignore_mismatched_sizes" not in str(exc) or kwargs.get("ignore_mismatched_sizes"):
                raise
            raise ValueError(_size_mismatch_line(model_class, folder, kwargs)) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys", ()))
    unexpected = sorted(k for k in info.get("unexpected_keys", ()) if not k.endswith(SCALE_KEY_SUFFIX))
    if missing or unexpected:
        raise ValueError(f"{folder}: the checkpoint does not fit {type(model).__name__}: missing keys "
                         f"{missing[:3]}, unexpected keys {unexpected[:3]}")
    if not scales:
        check_model_as_saved(model, folder)
        return (model, info) if wants_info else model
    add_layerscale(model, 1.0)
    params = _scales_by_checkpoint_name(model)
    if set(params) != set(scales):
        missing, extra = sorted(set(params) - set(scales)), sorted(set(scales) - set(params))
        raise ValueError(f"{folder}: the checkpoint's LayerScale keys do not match {type(model).__name__} after "
                         f"add_layerscale: missing {missing[:3]}, unexpected {extra[:3]}")
    with torch.no_grad():
        for name, param in params.items():
            if scales[name].shape != param.shape:
                raise ValueError(f"{folder}: {name} has shape {tuple(scales[name].shape)}, the model "
                                 f"{tuple(param.shape)}")
            param.copy_(scales[name].to(param.dtype))
    check_model_as_saved(model, folder)
    return (model, info) if wants_info else model
