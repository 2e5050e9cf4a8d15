"""A documented path kept after a move: importing ``layerscale.residual.fused_hyper_connections`` gives
:mod:`layerscale.residual.multi_stream.fused_hyper_connections`
itself (the same object, so its names and any patch of them are shared)."""

import sys

from .multi_stream import fused_hyper_connections as _module

sys.modules[__name__] = _module
