"""Models by name: ``create_model(name, **overrides)`` and ``list_models()``.

Named configurations carry their published hyper-parameters (CaiT: the official per-model LayerScale ε and
stochastic-depth rate). Any constructor argument may be overridden (``img_size``, ``patch_size``, ``depth``,
``embed_dim``, ``num_heads``, ``num_classes``, ``in_chans``, ``residual``, ...). Overriding ``depth`` with another
value and without ``init_value`` re-derives ε from the CaiT depth rule for the new depth (the model's own depth keeps
its official ε).
"""

from __future__ import annotations

import fnmatch
import inspect
import os
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ..suggest import did_you_mean
from .cait import CaiT
from .gpt import GPT
from .vit import VisionTransformer

__all__ = ["create_model", "list_models", "model_defaults"]


@dataclass(frozen=True)
class _Entry:
    family: type[nn.Module]
    defaults: dict[str, Any] = field(default_factory=dict)


def _cait(embed_dim, depth, heads, eps, dpr, img):
    return _Entry(CaiT, dict(img_size=img, patch_size=16, embed_dim=embed_dim, depth=depth, num_heads=heads,
                             init_value=eps, drop_path_rate=dpr))


_MODELS: dict[str, _Entry] = {
    # Official CaiT configurations: width, depth, heads, LayerScale ε (official code), drop-path rate, resolution.
    "cait_xxs24_224": _cait(192, 24, 4, 1e-5, 0.05, 224),
    "cait_xxs36_224": _cait(192, 36, 4, 1e-5, 0.1, 224),
    "cait_xs24_384": _cait(288, 24, 6, 1e-5, 0.05, 384),
    "cait_s24_224": _cait(384, 24, 8, 1e-5, 0.1, 224),
    "cait_s24_384": _cait(384, 24, 8, 1e-5, 0.1, 384),
    "cait_s36_384": _cait(384, 36, 8, 1e-6, 0.2, 384),
    "cait_m36_384": _cait(768, 36, 16, 1e-6, 0.3, 384),
    "cait_m48_448": _cait(768, 48, 16, 1e-6, 0.4, 448),
    # DeiT III ViTs (timm's configurations, LayerScale ε = 1e-6, position embedding on patches only).
    "deit3_tiny_patch16_224": _Entry(VisionTransformer, dict(embed_dim=192, depth=12, num_heads=3, init_value=1e-6)),
    "deit3_small_patch16_224": _Entry(VisionTransformer, dict(embed_dim=384, depth=12, num_heads=6, init_value=1e-6)),
    "deit3_base_patch16_224": _Entry(VisionTransformer, dict(embed_dim=768, depth=12, num_heads=12, init_value=1e-6)),
    # GPT-style byte-level language models.
    "gpt_nano": _Entry(GPT, dict(embed_dim=128, depth=4, num_heads=4, block_size=128)),
    "gpt_micro": _Entry(GPT, dict(embed_dim=192, depth=6, num_heads=6, block_size=256)),
    "gpt_mini": _Entry(GPT, dict(embed_dim=384, depth=6, num_heads=6, block_size=256)),
    "gpt_small": _Entry(GPT, dict(embed_dim=768, depth=12, num_heads=12, block_size=1024)),
    # Bare families: every argument from the constructor's defaults.
    "vit": _Entry(VisionTransformer),
    "cait": _Entry(CaiT),
    "gpt": _Entry(GPT),
}


def list_models(pattern: str | None = None) -> list[str]:
    """Names accepted by :func:`create_model`, sorted; with ``pattern``, only those matching it (an ``fnmatch``
    pattern, as timm's ``list_models``: ``"cait*"``, ``"*_224"``, ``"gpt_?ano"``)."""
    names = sorted(_MODELS)
    if pattern is None:
        return names
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a string such as 'cait*', got {pattern!r}")
    return [name for name in names if fnmatch.fnmatchcase(name, pattern)]


def _entry(name: str) -> _Entry:
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}{did_you_mean(name, list_models())}; known models: "
                         f"{', '.join(list_models())}")
    return _MODELS[name]


def model_defaults(name: str) -> dict[str, Any]:
    """The full keyword arguments ``create_model(name)`` passes to the model's constructor."""
    entry = _entry(name)
    params = inspect.signature(entry.family.__init__).parameters
    args = {k: p.default for k, p in params.items() if k != "self"}
    args.update(entry.defaults)
    return args


def create_model(name: str, pretrained: bool = False, pretrained_cfg_overlay: dict[str, Any] | None = None,
                 **overrides: Any) -> nn.Module:
    """Build model ``name`` with random weights, its named configuration updated by ``overrides``.

    ``pretrained=True`` loads local weights named by ``pretrained_cfg_overlay=dict(file=PATH)`` (timm's spelling)
    through :func:`layerscale.load_pretrained_into`: any format it recognises (timm, the official CaiT / DeiT III
    releases, Hugging Face DINOv2, ours). Nothing is downloaded; ``pretrained=True`` without a file is a
    ``ValueError`` saying where weights come from. With ``num_classes`` overridden and a head of another size in
    the file, the head keeps its random initialisation (as timm does); any other key the file lacks is refused.
    The other overlay entries update the model's ``pretrained_cfg`` (e.g. ``mean``, ``std``, ``crop_pct``).

    Unknown names and unknown override keys raise ``ValueError`` listing what is allowed; impossible
    configurations (width not divisible by heads, image size not divisible by patch size, depth < 1) raise
    ``ValueError`` from the constructor naming the value.
    """
    entry = _entry(name)
    args = model_defaults(name)
    unknown = sorted(set(overrides) - set(args))
    if unknown:
        hint = did_you_mean(unknown[0], args)
        raise ValueError(f"unknown argument(s) {', '.join(unknown)} for model {name!r}{hint}; allowed: "
                         f"{', '.join(sorted(args))}")
    if ("depth" in overrides and not {"init_value", "init_values"} & set(overrides) and "init_value" in entry.defaults
            and overrides["depth"] != entry.defaults.get("depth")):  # the model's own depth keeps its official ε
        args["init_value"] = None
    if overrides.get("init_values") is not None and "init_value" not in overrides:
        args["init_value"] = None  # the alias replaces the named configuration's ε
    args.update(overrides)
    overlay = _check_overlay(name, pretrained, pretrained_cfg_overlay)
    model = entry.family(**args)
    if hasattr(model, "pretrained_cfg"):
        model.pretrained_cfg = {"architecture": name, **{k: v for k, v in overlay.items() if k != "file"}}
    if pretrained:
        _load_local_weights(model, overlay["file"], head_may_differ="num_classes" in overrides)
    return model


def _check_overlay(name: str, pretrained: Any, overlay: dict[str, Any] | None) -> dict[str, Any]:
    if not isinstance(pretrained, bool):
        raise ValueError(f"pretrained must be True or False, got {pretrained!r}")
    if overlay is not None and not isinstance(overlay, dict):
        raise ValueError(f"pretrained_cfg_overlay must be a dict such as dict(file='weights.safetensors'), "
                         f"got {overlay!r}")
    overlay = dict(overlay or {})
    if pretrained and not overlay.get("file"):
        raise ValueError(f"pretrained=True for {name!r} needs local weights: pass pretrained_cfg_overlay="
                         f"dict(file=PATH) with a checkpoint from timm, the official CaiT / DeiT III release, "
                         f"Hugging Face DINOv2 or save_pretrained / layerscale train (nothing is downloaded)")
    if overlay.get("file") and not pretrained:
        raise ValueError(f"pretrained_cfg_overlay names file={overlay['file']!r} but pretrained=False; pass "
                         f"pretrained=True to load it")
    if pretrained and not os.path.exists(overlay["file"]):
        raise FileNotFoundError(f"{overlay['file']}: pretrained weights file not found")
    return overlay


def _load_local_weights(model: nn.Module, path: str, head_may_differ: bool) -> None:
    from ..interop import load_pretrained_into  # the converter imports the interop tables: only when loading

    if os.path.isdir(path):  # a save_pretrained folder: its weights file
        weights = os.path.join(path, "model.safetensors")
        if not os.path.isfile(weights):
            raise FileNotFoundError(f"{path}: a folder without model.safetensors; pass the weights file itself")
        path = weights
    try:
        load_pretrained_into(model, path, resample_pos_embed=True)
    except ValueError as error:
        if not head_may_differ:
            raise
        try:  # another num_classes than the file's: load everything but the head
            report = load_pretrained_into(model, path, strict=False, drop=("head.",), resample_pos_embed=True)
        except ValueError:
            raise error from None
        if any(not key.startswith("head.") for key in report.kept):  # only the head may keep its random values
            raise error from None
