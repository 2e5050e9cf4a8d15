"""Depth utilisation: are the deep blocks of a model doing anything?

:func:`analyze_depth` measures, per block of a trained model on an evaluation set: the loss and accuracy when the
block is ablated (cached-suffix, about ``L²/2`` block evaluations), early exit after each block (the logit lens for
a language model), Gromov et al.'s angular distance on the token the head reads, the all-token angular distance,
ShortGPT's Block Influence and the relative update between the stream entering and leaving the block, the
contiguous n-block removal curve, linear-probe accuracy at the embedding, the block output and module points
(classifiers), and the linear or debiased CKA between block outputs; then an effective depth and the other
one-line answers of :mod:`~layerscale.analysis.summary`, every number with a bootstrap interval.
:func:`rank_blocks` and :func:`gromov_best_span` (:mod:`~layerscale.analysis.pruning.block_ranking`) score the blocks
for pruning; :func:`compare_criteria` removes ``n = 1 … N`` blocks by each of the papers' criteria
(:mod:`~layerscale.analysis.pruning.criteria`: ``gromov``, ``block_influence``, ``angular``, ``ablation``, ``gamma``)
and compares them with intervals.
:func:`analyze_run` does the same for a run directory written by ``layerscale train``. See docs/analysis.md.
"""

from .analyze import analyze_depth
from .measures.cka import cka_matrix, debiased_cka_matrix, linear_cka
from .measures.geometry import angular_distance, relative_update_norm
from .pruning.block_ranking import gromov_best_span, rank_blocks
from .pruning.criteria import CRITERIA
from .pruning.criterion_comparison import CriterionComparison, compare_criteria
from .result import DepthAnalysis, effective_depth, effective_depth_interval
from .source import analyze_run, load_run_model
from .summary import DepthSummary

__all__ = [
    "CRITERIA", "CriterionComparison", "DepthAnalysis", "DepthSummary", "analyze_depth", "analyze_run",
    "angular_distance", "cka_matrix", "compare_criteria",
    "debiased_cka_matrix", "effective_depth", "effective_depth_interval", "gromov_best_span", "linear_cka",
    "load_run_model", "rank_blocks", "relative_update_norm",
]
