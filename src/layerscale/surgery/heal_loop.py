"""The documented path of :mod:`layerscale.surgery.healing.heal_loop`: importing ``layerscale.surgery.heal_loop`` gives
that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .healing import heal_loop as _module

sys.modules[__name__] = _module
