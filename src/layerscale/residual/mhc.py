"""A documented path kept after a move: importing ``layerscale.residual.mhc`` gives
:mod:`layerscale.residual.multi_stream.mhc`
itself (the same object, so its names and any patch of them are shared)."""

import sys

from .multi_stream import mhc as _module

sys.modules[__name__] = _module
