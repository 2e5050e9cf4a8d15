"""The documented path of :mod:`layerscale.analysis.pruning.block_ranking`: importing
``layerscale.analysis.block_ranking`` gives that very module (the same object, so its names and any patch of them
are shared)."""

import sys

from .pruning import block_ranking as _module

sys.modules[__name__] = _module
