"""A documented path kept after a move: importing ``layerscale.residual.admin`` gives
:mod:`layerscale.residual.branch_scaling.admin`
itself (the same object, so its names and any patch of them are shared)."""

import sys

from .branch_scaling import admin as _module

sys.modules[__name__] = _module
