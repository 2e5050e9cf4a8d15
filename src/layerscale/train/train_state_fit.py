"""The documented path of :mod:`layerscale.train.state.train_state_fit`: importing ``layerscale.train.train_state_fit``
gives that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .state import train_state_fit as _module

sys.modules[__name__] = _module
