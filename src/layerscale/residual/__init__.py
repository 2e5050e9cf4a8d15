"""Residual-stabilisation methods behind one switch (``residual=``); see ``list_residuals()``."""

# layers.block imports residual.base, which imports layers.layer_scale: entered from this package, the layers
# package must be initialised first or the cycle meets a half-defined residual.base.
from .. import layers as _layers  # noqa: F401,I001
from .base import PLACEMENTS, BlockContext, ResidualMethod
from .registry import get_residual, list_residuals, resolve_residual
from .step_hook import after_optimizer_step

__all__ = ["PLACEMENTS", "BlockContext", "ResidualMethod", "after_optimizer_step", "get_residual", "list_residuals",
           "resolve_residual"]
