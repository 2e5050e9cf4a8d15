"""Depth utilisation: are the deep blocks of a model doing anything?

:func:`analyze_depth` measures, per block of a trained model on an evaluation set: the loss and accuracy when the
block is ablated (cached-suffix, about ``L²/2`` block evaluations), early exit after each block (the logit lens for
a language model), the angular distance and relative update between the stream entering and leaving the block,
linear-probe accuracy at the block output and at module points (classifiers), and the linear CKA between block
outputs; then an effective depth and the other one-line answers of :mod:`~layerscale.analysis.summary`.
:func:`analyze_run` does the same for a run directory written by ``layerscale train``. See docs/analysis.md.
"""

from .analyze import analyze_depth
from .cka import cka_matrix, linear_cka
from .geometry import angular_distance, relative_update_norm
from .result import DepthAnalysis, effective_depth
from .source import analyze_run, load_run_model
from .summary import DepthSummary

__all__ = [
    "DepthAnalysis", "DepthSummary", "analyze_depth", "analyze_run", "angular_distance", "cka_matrix",
    "effective_depth", "linear_cka", "load_run_model", "relative_update_norm",
]
