"""The documented path of :mod:`layerscale.analysis.pruning.set_depth`: importing ``layerscale.analysis.set_depth``
gives that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .pruning import set_depth as _module

sys.modules[__name__] = _module
