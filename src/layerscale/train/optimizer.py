"""The documented path of :mod:`layerscale.train.loop.optimizer`: importing ``layerscale.train.optimizer`` gives that
very module (the same object, so its names and any patch of them are shared)."""

import sys

from .loop import optimizer as _module

sys.modules[__name__] = _module
