"""The documented path of :mod:`layerscale.analysis.pruning.criteria`: importing ``layerscale.analysis.criteria`` gives
that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .pruning import criteria as _module

sys.modules[__name__] = _module
