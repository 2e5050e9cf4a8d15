"""The documented path of :mod:`layerscale.train.loop.auto_policy`: importing ``layerscale.train.auto_policy`` gives
that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .loop import auto_policy as _module

sys.modules[__name__] = _module
