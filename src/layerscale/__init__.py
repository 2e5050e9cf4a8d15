"""torch-layerscale: train deeper transformers that stay stable.

LayerScale (Touvron et al. 2021, CaiT, arXiv 2103.17239) multiplies each residual branch by a learnable per-channel
γ initialised near zero, ``x + γ ⊙ F(LN(x))``, so deep Pre-LN transformers start near the identity.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below are imported on first use (see __getattr__), not with the package
    from .interop import convert_state_dict, export_state_dict, load_pretrained_into
    from .layers import (
        Block, ClassAttentionBlock, HeadScale, LayerScale, LayerScale2d, ScalarScale, init_value_for_depth,
    )
    from .models import GPT, CaiT, VisionTransformer, create_model, list_models
    from .residual import get_residual, list_residuals
    from .surgery import add_layerscale, fold_layerscale, grow, prune
    from .train.loop.param_groups import param_groups
    from .integrations.timm_registry import register_timm

__version__ = "0.1.0"

# Public name -> the submodule defining it. Importing the package imports none of them (nor torch), so that
# `layerscale --help` starts in well under a second; `from layerscale import X` imports X's submodule (PEP 562).
_LAZY_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("Block", "ClassAttentionBlock", "HeadScale", "LayerScale", "LayerScale2d", "ScalarScale",
                     "init_value_for_depth"), ".layers"),
    **dict.fromkeys(("CaiT", "GPT", "VisionTransformer", "create_model", "list_models"), ".models"),
    **dict.fromkeys(("convert_state_dict", "export_state_dict", "load_pretrained_into"), ".interop"),
    **dict.fromkeys(("get_residual", "list_residuals"), ".residual"),
    **dict.fromkeys(("add_layerscale", "fold_layerscale", "grow", "prune"), ".surgery"),
    "param_groups": ".train.loop.param_groups",
    "register_timm": ".integrations.timm_registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:  # a subpackage reached as an attribute (`layerscale.train.run` after `import layerscale`)
        if name.startswith("_"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_EXPORTS})

__all__ = [
    "Block", "CaiT", "ClassAttentionBlock", "GPT", "HeadScale", "LayerScale", "LayerScale2d", "ScalarScale",
    "VisionTransformer", "create_model", "get_residual", "init_value_for_depth", "list_models", "list_residuals",
    "param_groups", "__version__",
    "add_layerscale", "convert_state_dict", "export_state_dict", "fold_layerscale", "load_pretrained_into",
    "register_timm", "grow", "prune",
]
