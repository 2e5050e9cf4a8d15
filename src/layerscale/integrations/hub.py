"""The Hugging Face Hub layout of our models, under its historical import path.

The save / load rule describes models, so it lives in :mod:`layerscale.models.hub_mixin`; this module re-exports it
for code that imported it from here.
"""

from __future__ import annotations

from ..models.hub_mixin import CONFIG_NAME, MODEL_CARD_NAME, WEIGHTS_NAME, HubMixin

__all__ = ["HubMixin", "CONFIG_NAME", "WEIGHTS_NAME", "MODEL_CARD_NAME"]
