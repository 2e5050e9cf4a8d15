"""A documented path kept after a move: importing ``layerscale.residual.attnres_block`` gives
:mod:`layerscale.residual.multi_stream.attnres_block`
itself (the same object, so its names and any patch of them are shared)."""

import sys

from .multi_stream import attnres_block as _module

sys.modules[__name__] = _module
