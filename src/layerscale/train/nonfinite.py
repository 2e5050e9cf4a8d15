"""The documented path of :mod:`layerscale.train.loop.nonfinite`: importing ``layerscale.train.nonfinite`` gives that
very module (the same object, so its names and any patch of them are shared)."""

import sys

from .loop import nonfinite as _module

sys.modules[__name__] = _module
