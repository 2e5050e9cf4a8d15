"""The documented path of :mod:`layerscale.analysis.outputs.report`: importing ``layerscale.analysis.report`` gives
that very module (the same object, so its names and any patch of them are shared)."""

import sys

from .outputs import report as _module

sys.modules[__name__] = _module
