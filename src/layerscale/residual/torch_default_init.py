"""A documented path kept after a move: importing ``layerscale.residual.torch_default_init`` gives
:mod:`layerscale.residual.initialization.torch_default_init`
itself (the same object, so its names and any patch of them are shared)."""

import sys

from .initialization import torch_default_init as _module

sys.modules[__name__] = _module
