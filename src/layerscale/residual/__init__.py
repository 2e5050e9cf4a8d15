"""Residual-stabilisation methods behind one switch (``residual=``); see ``list_residuals()``."""

from .base import PLACEMENTS, BlockContext, ResidualMethod
from .registry import get_residual, list_residuals, resolve_residual

__all__ = ["PLACEMENTS", "BlockContext", "ResidualMethod", "get_residual", "list_residuals", "resolve_residual"]
