"""The documented path of :mod:`layerscale.train.loop.param_groups`: importing ``layerscale.train.param_groups`` gives
that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .loop import param_groups as _module

sys.modules[__name__] = _module
