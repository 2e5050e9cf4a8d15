"""Registry of residual-stabilisation methods: one line per method, imported on first use."""

from __future__ import annotations

import importlib

from ..suggest import did_you_mean
from .base import ResidualMethod

__all__ = ["get_residual", "list_residuals", "resolve_residual"]

# name -> "module:Class" inside layerscale.residual. Adding a method: one file and one line here.
_METHODS: dict[str, str] = {
    "prenorm": "prenorm:PreNorm",
    "layerscale": "layerscale:LayerScaleResidual",
    "layerscale_head": "layerscale_head:LayerScaleHead",
    "scalar": "scalar:ScalarResidual",
    "postnorm": "postnorm:PostNorm",
    "rezero": "rezero:ReZero",
    "skipinit": "skipinit:SkipInit",
    "tfixup": "tfixup:TFixup",
    "deepnorm": "deepnorm:DeepNorm",
    "lns": "lns:LayerNormScaling",
    "periln": "periln:PeriLN",
    "mixln": "mixln:MixLN",
    "dyt": "dyt:DyTResidual",
    "hc": "hyper_connections:HyperConnections",
    "hc_static": "hyper_connections:StaticHyperConnections",
    "mhc": "mhc:ManifoldConstrainedHyperConnections",
    "normformer": "normformer:NormFormer",
    "admin": "admin:Admin",
    "attnres": "attnres:AttentionResiduals",
    "attnres_block": "attnres_block:BlockAttentionResiduals",
    "bhyt": "bhyt:BHyTResidual",
}


def list_residuals() -> list[str]:
    """The names accepted by ``residual=`` on every block and model."""
    return sorted(_METHODS)


def get_residual(name: str) -> ResidualMethod:
    """A fresh instance of the method called ``name``; unknown names raise ``ValueError`` listing the known ones."""
    if name not in _METHODS:
        raise ValueError(f"unknown residual method {name!r}{did_you_mean(name, list_residuals())}; known methods: "
                         f"{', '.join(list_residuals())}")
    module_name, class_name = _METHODS[name].split(":")
    module = importlib.import_module(f"{__package__}.{module_name}")
    return getattr(module, class_name)()


def resolve_residual(method: str | ResidualMethod) -> ResidualMethod:
    """Accept a name or an instance (for user-defined methods)."""
    if isinstance(method, ResidualMethod):
        return method
    if not isinstance(method, str):
        raise ValueError(f"residual must be a method name or a ResidualMethod, got {method!r}")
    return get_residual(method)
