"""Models by name: ``create_model(name, **overrides)`` and ``list_models()``.

Named configurations carry their published hyper-parameters (CaiT: the official per-model LayerScale ε and
stochastic-depth rate). Any constructor argument may be overridden (``img_size``, ``patch_size``, ``depth``,
``embed_dim``, ``num_heads``, ``num_classes``, ``in_chans``, ``residual``, ...). Overriding ``depth`` without
``init_value`` re-derives ε from the CaiT depth rule for the new depth.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from torch import nn

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


def list_models() -> list[str]:
    """Names accepted by :func:`create_model`."""
    return sorted(_MODELS)


def _entry(name: str) -> _Entry:
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(list_models())}")
    return _MODELS[name]


def model_defaults(name: str) -> dict[str, Any]:
    """The full keyword arguments ``create_model(name)`` passes to the model's constructor."""
    entry = _entry(name)
    params = inspect.signature(entry.family.__init__).parameters
    args = {k: p.default for k, p in params.items() if k != "self"}
    args.update(entry.defaults)
    return args


def create_model(name: str, **overrides: Any) -> nn.Module:
    """Build model ``name`` with random weights, its named configuration updated by ``overrides``.

    Unknown names and unknown override keys raise ``ValueError`` listing what is allowed; impossible
    configurations (width not divisible by heads, image size not divisible by patch size, depth < 1) raise
    ``ValueError`` from the constructor naming the value.
    """
    entry = _entry(name)
    args = model_defaults(name)
    unknown = sorted(set(overrides) - set(args))
    if unknown:
        raise ValueError(f"unknown argument(s) {unknown} for model {name!r}; allowed: {', '.join(sorted(args))}")
    if "depth" in overrides and "init_value" not in overrides and "init_value" in entry.defaults:
        args["init_value"] = None
    args.update(overrides)
    return entry.family(**args)
