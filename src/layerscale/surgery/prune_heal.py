"""The documented path of :mod:`layerscale.surgery.healing.prune_heal`: importing ``layerscale.surgery.prune_heal``
gives that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .healing import prune_heal as _module

sys.modules[__name__] = _module
