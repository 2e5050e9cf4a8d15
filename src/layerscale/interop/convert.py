"""Convert state dicts between our keys and timm, the official CaiT / DeiT III code and Hugging Face DINOv2.

``convert_state_dict(sd, source, target)`` renames through the explicit tables of :mod:`layerscale.interop`
(source → ours → target); ``load_pretrained_into(model, checkpoint)`` reads a file or dict, recognises its format,
converts it to the model's own layout and loads it, refusing missing, unexpected or mis-shaped keys with one
message that lists them; ``export_state_dict(model, target)`` is the way back out.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import torch
from torch import nn

from ..checkpoint_io import read_state_dict_file, unwrap_state_dict
from ..messages import shown_names
from ..models.validation import check_bool
from ..weight_checks import check_loadable_weights
from .formats import CANONICAL, detect_format, get_format, resolve_format_name
from .rules import ConversionReport, format_keys
from .settings import compare_settings, config_settings, model_settings, settings_not_in_keys

__all__ = [
    "normalize_checkpoint",
    "check_fits",
    "convert_state_dict",
    "convert_with_report",
    "format_of_model",
    "load_pretrained_into",
    "export_state_dict",
]

StateDict = dict[str, torch.Tensor]


def normalize_checkpoint(checkpoint: Any, source: str = "checkpoint") -> tuple[StateDict, list[str]]:
    """``(state_dict, notes)``: the tensors of ``checkpoint`` with common wrappers removed.

    Unwraps ``{"model": ...}`` (official DeiT / CaiT files) and the other containers of
    :data:`layerscale.checkpoint_io.STATE_DICT_CONTAINERS`, and strips a ``module.`` prefix present on every key
    (``DistributedDataParallel``). ``notes`` says what was removed.
    """
    tensors, container = unwrap_state_dict(checkpoint, source)
    notes = [f"weights found under {container!r}"] if container else []
    return _strip_module_prefix(tensors, notes), notes


def _strip_module_prefix(tensors: StateDict, notes: list[str]) -> StateDict:
    if tensors and all(k.startswith("module.") for k in tensors):
        notes.append("prefix 'module.' stripped")
        return {k[len("module."):]: v for k, v in tensors.items()}
    return tensors


def _drop_prefixes(state_dict: StateDict, drop: Sequence[str], report: ConversionReport) -> StateDict:
    if isinstance(drop, str):
        drop = (drop,)
    for prefix in drop:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"drop must be a sequence of non-empty key prefixes, got {prefix!r}")
        hit = [k for k in state_dict if k.startswith(prefix)]
        if not hit:
            raise ValueError(f"drop prefix {prefix!r} matches no key; keys look like {format_keys(state_dict, 6)}")
        report.dropped.append((f"{prefix}* ({len(hit)} keys)", "asked to drop"))
        state_dict = {k: v for k, v in state_dict.items() if not k.startswith(prefix)}
    if drop and not state_dict:  # a checkpoint of no tensor is no conversion: refused before anything is written
        raise ValueError(f"drop prefixes {shown_names(drop)} leave no key; nothing to convert")
    return state_dict


def convert_with_report(state_dict: Mapping[str, torch.Tensor], source: str = "auto", target: str = CANONICAL, *,
                        drop: Sequence[str] = (), target_keys: Iterable[str] | None = None,
                        ) -> tuple[StateDict, ConversionReport]:
    """:func:`convert_state_dict` that also returns the :class:`~layerscale.interop.ConversionReport`."""
    notes: list[str] = []
    state_dict = _strip_module_prefix(dict(state_dict), notes)
    target = resolve_format_name(target)
    if source == "auto":
        source = detect_format(state_dict)
        notes.append(f"detected format: {source}")
    source = resolve_format_name(source)
    report = ConversionReport(source, target, notes=notes, unchecked=list(settings_not_in_keys(source)))
    state_dict = _drop_prefixes(state_dict, drop, report)
    src_fmt, dst_fmt = get_format(source), get_format(target)
    canonical = state_dict if src_fmt is None else src_fmt.to_canonical(state_dict, report)
    if dst_fmt is None:
        if src_fmt is None:
            report.count("unchanged names", len(canonical))
        return canonical, report
    if src_fmt is not None:  # two foreign formats: count the second leg only, the first is in the same report
        report.notes.append(f"via the layerscale format ({sum(report.counts.values())} tensors read)")
        report.counts.clear()
    return dst_fmt.from_canonical(canonical, report, like=target_keys), report


def convert_state_dict(state_dict: Mapping[str, torch.Tensor], source: str = "auto", target: str = CANONICAL, *,
                       drop: Sequence[str] = (), target_keys: Iterable[str] | None = None) -> StateDict:
    """Rename ``state_dict`` from format ``source`` to format ``target`` (both from :func:`list_formats`).

    ``source="auto"`` recognises the format from the keys (:func:`detect_format`); a ``module.`` prefix on every
    key is stripped. ``drop`` lists key prefixes to leave out on purpose (for example ``"classifier."`` of a
    Hugging Face task model). Keys that no rule of the tables claims raise ``ValueError`` listing them; tensors
    are not copied unless they must be concatenated or split.

    ``target_keys``: the keys of the model the result is for. Where the target library has renamed keys across
    releases (Hugging Face DINOv2 before transformers 5.18), the names these keys use are written (keys mixing
    both raise ``ValueError``); without them, the names of the installed release (the current names when it is not
    installed).
    """
    return convert_with_report(state_dict, source, target, drop=drop, target_keys=target_keys)[0]


def format_of_model(model: nn.Module) -> str:
    """The key layout ``model.state_dict()`` uses: ``"layerscale"`` for our models, ``"timm_vit"`` / ``"timm_cait"``
    for timm's ``VisionTransformer`` / ``Cait``, ``"hf_dinov2"`` for ``transformers.Dinov2Model``."""
    if type(model).__module__.split(".")[0] == "layerscale":
        return CANONICAL
    if "timm" in sys.modules:
        from timm.models.cait import Cait
        from timm.models.vision_transformer import VisionTransformer

        if isinstance(model, VisionTransformer):
            return "timm_vit"
        if isinstance(model, Cait):
            return "timm_cait"
    if "transformers" in sys.modules:
        from transformers import Dinov2Model

        if isinstance(model, Dinov2Model):
            return "hf_dinov2"
    raise ValueError(f"no checkpoint format known for a {type(model).__name__}; supported: layerscale models, "
                     f"timm VisionTransformer and Cait, transformers Dinov2Model (for a Dinov2 task model use "
                     f"its .dinov2 backbone)")


def _read(checkpoint: str | os.PathLike | Mapping[str, Any] | nn.Module) -> tuple[StateDict, list[str]]:
    if isinstance(checkpoint, nn.Module):
        return {k: v.detach() for k, v in checkpoint.state_dict().items()}, [
            f"read the state dict of a {type(checkpoint).__name__}"]
    if isinstance(checkpoint, (str, os.PathLike)):
        loaded = read_state_dict_file(checkpoint)
        notes = [f"read {Path(checkpoint)} ({loaded.file_format})"]
        if loaded.container:
            notes.append(f"weights found under {loaded.container!r}")
        return loaded.tensors, notes
    return normalize_checkpoint(checkpoint, "checkpoint")


def load_pretrained_into(model: nn.Module, checkpoint: str | os.PathLike | Mapping[str, Any] | nn.Module,
                         source: str = "auto", *, strict: bool = True, drop: Sequence[str] = (),
                         config: Any = None, resample_pos_embed: bool = False) -> ConversionReport:
    """Load ``checkpoint`` (a path, a state dict, or a model object; any supported format) into ``model``; return
    the report.

    The checkpoint is converted to ``model``'s own layout (:func:`format_of_model`; for a peer library's model, in
    the key names of its release, read from ``model.state_dict()``) and compared with ``model.state_dict()``
    before anything is copied: keys the model lacks, and shape mismatches, always raise
    ``ValueError`` listing them; keys the checkpoint lacks raise too unless ``strict=False`` (then they keep their
    current values and are listed in the report's notes — e.g. a classification head when loading a backbone;
    missing ``qkv`` biases are refused even then: they mean a model built with ``qkv_bias=False``).

    Settings that change the computation without changing any key (pooling, ``fc_norm``, activation, norm ε,
    head count, ...; :mod:`layerscale.interop.settings`) are compared with ``model``'s when ``checkpoint`` is a
    model object (timm ``VisionTransformer`` / ``Cait``, ``transformers`` ``Dinov2Model``, ours) or ``config``
    (a Hugging Face DINOv2 config, its dict or its ``config.json`` path) is given; a difference raises
    ``ValueError`` naming it. Otherwise the report's ``unchecked`` lists the settings that went unchecked.

    ``resample_pos_embed=True``: a ``pos_embed`` of another patch grid (weights trained at another image size) is
    resampled to the model's grid as timm does when it loads pretrained weights
    (:func:`layerscale.models.pos_embed_resample.resample_pos_embed`), and noted in the report.
    """
    strict, resample_pos_embed = check_bool("strict", strict), check_bool("resample_pos_embed", resample_pos_embed)
    source_settings = model_settings(checkpoint) if isinstance(checkpoint, nn.Module) else {}
    if config is not None:
        source_settings = {**source_settings, **config_settings(config)}
    if source == "auto" and isinstance(checkpoint, nn.Module):
        source = format_of_model(checkpoint)
    target_settings = model_settings(model)
    if source_settings:
        compare_settings(source_settings, target_settings, "checkpoint's source model", type(model).__name__)
    tensors, notes = _read(checkpoint)
    target = format_of_model(model)
    expected = model.state_dict()
    converted, report = convert_with_report(tensors, source, target, drop=drop, target_keys=expected.keys())
    if resample_pos_embed:
        converted = _pos_embed_for_grid(model, converted, report.notes)
    _refuse_peerless_residual(model, report.source)
    report.notes[:0] = notes
    if source_settings and target_settings:
        report.unchecked = [name for name in report.unchecked
                            if source_settings.get(name) is None or target_settings.get(name) is None]
    missing = check_fits(expected, converted, strict=strict,
                         what=f"checkpoint ({report.source}) does not fit {type(model).__name__}")
    _refuse_missing_qkv_bias(missing, type(model).__name__)
    check_loadable_weights(converted, expected, str(checkpoint) if isinstance(checkpoint, (str, os.PathLike))
                           else f"checkpoint ({report.source})")  # integer, boolean or NaN weights: refused
    with torch.no_grad():
        model.load_state_dict(converted, strict=not missing)
    if missing:
        report.kept = list(missing)
        report.notes.append(f"kept the model's own values for {len(missing)} key(s) {format_keys(missing)}")
    return report


def _pos_embed_for_grid(model: nn.Module, state_dict: dict[str, torch.Tensor], notes: list[str]) -> dict:
    """``state_dict`` with its ``pos_embed`` resampled to ``model``'s patch grid where the sizes differ."""
    from ..models.pos_embed_resample import resample_pos_embed

    own = model.state_dict().get("pos_embed")
    given = state_dict.get("pos_embed")
    patch_embed = getattr(model, "patch_embed", None)
    if own is None or given is None or patch_embed is None or own.shape == given.shape:
        return state_dict
    prefix = own.shape[1] - patch_embed.num_patches  # ViT with the class token's position inside: 1
    grid = patch_embed.grid_size
    resampled = resample_pos_embed(given, (grid, grid), num_prefix_tokens=prefix)
    notes.append(f"pos_embed resampled from {tuple(given.shape)} to {tuple(resampled.shape)} (bicubic, antialiased: "
                 f"the checkpoint was trained at another image size)")
    return {**state_dict, "pos_embed": resampled}


#: Residual methods whose blocks timm and Hugging Face have: Pre-LN, with or without LayerScale (a per-channel,
#: scalar or per-head γ shows in the keys and shapes, which the peer's own load checks, and a folded model is
#: Pre-LN). Every other method computes what no peer block does, even where its keys are Pre-LN's (Post-LN,
#: DeepNorm, LayerNorm Scaling, ReZero, ...): exported to timm it would load strictly and compute another function.
#: Their checkpoints stay in our format.
PEER_RESIDUALS = frozenset({"prenorm", "layerscale", "layerscale_head", "scalar"})


def _refuse_peerless_residual(model: nn.Module, other_format: str) -> None:
    residual = getattr(model, "residual", None)
    if other_format != CANONICAL and isinstance(residual, str) and residual not in PEER_RESIDUALS:
        raise ValueError(f"residual {residual!r} has no {other_format} checkpoint layout (timm and Hugging Face have "
                         f"no such blocks); keep its checkpoints in the {CANONICAL!r} format")


def _refuse_missing_qkv_bias(missing: list[str], model_name: str) -> None:
    """Missing query/key/value biases are a different model (``qkv_bias=False``), not a head left to train."""
    qkv = [k for k in missing if k.endswith(("qkv.bias", "q_proj.bias", "k_proj.bias", "v_proj.bias",
                                             "attention.query.bias", "attention.key.bias", "attention.value.bias"))]
    if qkv:
        raise ValueError(f"the checkpoint has no query/key/value biases but the {model_name} has them "
                         f"({format_keys(qkv, 3)}): the source was built with qkv_bias=False; build the model "
                         f"with qkv_bias=False")


def check_fits(expected: Mapping[str, torch.Tensor], state_dict: Mapping[str, torch.Tensor], *, strict: bool = True,
               what: str = "state dict does not fit") -> list[str]:
    """Compare ``state_dict`` with a model's ``expected`` state dict (meta tensors are fine: only shapes are read).

    Unexpected keys and shape mismatches always raise one ``ValueError`` listing them (prefixed by ``what``);
    missing keys raise too when ``strict``. Returns the missing keys.
    """
    unexpected = sorted(set(state_dict) - set(expected))
    missing = sorted(set(expected) - set(state_dict))
    mismatched = [f"{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(expected[k].shape)}"
                  for k in sorted(set(state_dict) & set(expected)) if state_dict[k].shape != expected[k].shape]
    problems = []
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected key(s) {format_keys(unexpected)}")
    if missing and strict:
        problems.append(f"{len(missing)} missing key(s) {format_keys(missing)}")
    if mismatched:
        problems.append(f"{len(mismatched)} shape mismatch(es) [{'; '.join(mismatched[:6])}]")
    if problems:
        raise ValueError(f"{what}: " + "; ".join(problems))
    return missing


def export_state_dict(model: nn.Module, target: str) -> StateDict:
    """``model.state_dict()`` renamed into format ``target`` (tensors detached; see :func:`convert_state_dict`)."""
    _refuse_peerless_residual(model, resolve_format_name(target))
    state = {k: v.detach() for k, v in model.state_dict().items()}
    return convert_state_dict(state, format_of_model(model), target)
