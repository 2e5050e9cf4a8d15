"""Registry of residual-stabilisation methods: one line per method, imported on first use."""

from __future__ import annotations

import importlib

from ..suggest import did_you_mean
from .base import ResidualMethod

__all__ = ["get_residual", "list_residuals", "resolve_residual"]

# name -> "sub_package.module:Class" inside layerscale.residual. Adding a method: one file in the sub-package of
# its concern (docs/ARCHITECTURE.md) and one line here.
_METHODS: dict[str, str] = {
    "prenorm": "normalization.prenorm:PreNorm",
    "layerscale": "branch_scaling.layerscale:LayerScaleResidual",
    "layerscale_head": "branch_scaling.layerscale_head:LayerScaleHead",
    "scalar": "branch_scaling.scalar:ScalarResidual",
    "postnorm": "normalization.postnorm:PostNorm",
    "rezero": "branch_scaling.rezero:ReZero",
    "skipinit": "branch_scaling.skipinit:SkipInit",
    "tfixup": "initialization.tfixup:TFixup",
    "deepnorm": "branch_scaling.deepnorm:DeepNorm",
    "lns": "normalization.lns:LayerNormScaling",
    "periln": "normalization.periln:PeriLN",
    "mixln": "normalization.mixln:MixLN",
    "dyt": "normalization.dyt:DyTResidual",
    "hc": "multi_stream.hyper_connections:HyperConnections",
    "hc_static": "multi_stream.hyper_connections:StaticHyperConnections",
    "mhc": "multi_stream.mhc:ManifoldConstrainedHyperConnections",
    "normformer": "normalization.normformer:NormFormer",
    "admin": "branch_scaling.admin:Admin",
    "attnres": "multi_stream.attnres:AttentionResiduals",
    "attnres_block": "multi_stream.attnres_block:BlockAttentionResiduals",
    "bhyt": "normalization.bhyt:BHyTResidual",
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
