"""A documented path kept after a move: importing ``layerscale.residual.bhyt`` gives
:mod:`layerscale.residual.normalization.bhyt`
itself (the same object, so its names and any patch of them are shared)."""

import sys

from .normalization import bhyt as _module

sys.modules[__name__] = _module
