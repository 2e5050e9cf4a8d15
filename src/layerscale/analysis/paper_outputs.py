"""The documented path of :mod:`layerscale.analysis.outputs.paper_outputs`: importing
``layerscale.analysis.paper_outputs`` gives that very module (the same object, so its names and any patch of them
are shared)."""

import sys

from .outputs import paper_outputs as _module

sys.modules[__name__] = _module
