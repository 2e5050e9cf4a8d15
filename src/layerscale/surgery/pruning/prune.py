"""Prune a model's depth: remove chosen blocks, keep everything else, record the new depth.

Removing block ``l`` sets ``x_{l+1} = x_l`` — the residual stream skips it — which is what the literature's depth
pruning does (Gromov et al. 2024, "The Unreasonable Ineffectiveness of the Deeper Layers", §3: drop ``n`` layers,
then heal with a short fine-tune; Men et al. 2024, ShortGPT: drop the layers of lowest Block Influence). Which
blocks go is decided by a criterion's score per block, lower meaning more removable:

* ``gamma`` (LayerScale models only): the size of the γ-weighted branches relative to the stream they update,
  ``score_l = Σ_{i∈{attn, mlp}} ‖γ_i ⊙ F_i(norm_i(x))‖ / ‖x‖`` over the evaluation batches (Frobenius norms
  pooled over the batches, :class:`~layerscale.diagnostics.LayerScaleMonitor`'s ``ratio``): a block whose scaled
  branches barely move the stream is nearly the identity that pruning makes it;
* ``angular`` (the single-block angular distance, *not* Gromov et al.'s span), ``block_influence`` (ShortGPT),
  ``ablation``: :func:`layerscale.analysis.pruning.block_ranking.rank_blocks`.

The blocks removed are the ``N`` lowest scores (ties: the deeper block first, the usual choice of depth pruning).
Gromov et al.'s own criterion — the contiguous span of ``n`` blocks whose input and output are closest — scores
spans, not blocks: it is ``gromov`` in :mod:`layerscale.analysis.pruning.criteria`, which ``layerscale prune --by`` uses
for every criterion (:mod:`~layerscale.surgery.pruning.prune_criteria`).
"""

from __future__ import annotations

import copy
import importlib
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from ...models.validation import check_bool
from ..block_list import block_family
from ..growth.new_blocks import forget_new_blocks

__all__ = ["prune", "block_scores", "blocks_to_remove", "PRUNE_CRITERIA", "gamma_scores"]

PRUNE_CRITERIA = ("angular", "block_influence", "ablation", "gamma")


def prune(model: nn.Module, blocks: Sequence[int], *, inplace: bool = False) -> nn.Module:
    """``model`` without the blocks ``blocks`` (0-based indices of the main stack; order and repeats do not
    matter), its recorded depth updated (see :mod:`layerscale.surgery.block_list`); a deep copy unless
    ``inplace`` (True or False). ``ValueError`` (one line) for an index past the depth, when no block would be
    left, or for an ``inplace`` that is not a bool (the string ``"no"`` is truthy: it would change ``model``)."""
    inplace = check_bool("inplace", inplace)
    family = block_family(model)
    family.check_editable(model)
    depth = len(family.blocks(model))
    remove = set()
    for index in blocks:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"block indices must be integers, got {index!r}")
        if not 0 <= index < depth:
            raise ValueError(f"block index {index} is past the depth (blocks 0..{depth - 1})")
        remove.add(index)
    if not remove:
        raise ValueError("no block to remove: give at least one block index")
    if len(remove) >= depth:
        raise ValueError(f"removing {len(remove)} of {depth} blocks would leave none; remove at most {depth - 1}")
    kept = [i for i in range(depth) if i not in remove]
    source = family.blocks(model)
    family.check_rebuildable(model, [source[i] for i in kept], kept)  # before a copy is made or anything changes
    target = model if inplace else copy.deepcopy(model)
    blocks = family.blocks(target)
    family.install(target, [blocks[i] for i in kept], kept)
    forget_new_blocks(target)  # indices of a former growth no longer hold
    return target


def gamma_scores(model: nn.Module, batches: Iterable[torch.Tensor]) -> list[float]:
    """``Σ_i ‖γ_i ⊙ F_i‖ / ‖x‖`` per block of the main stack over ``batches`` of inputs:
    :func:`layerscale.analysis.pruning.gamma_score.gamma_scores` (its docstring has the formula). ``ValueError`` when a
    block lacks LayerScale on a branch: the criterion is about LayerScale's γ."""
    from ...analysis.pruning.gamma_score import gamma_scores as scores

    return scores(model, batches)


def block_scores(model: nn.Module, data: Any, by: str, *, device: str = "cpu", batch_size: int = 250) -> list[float]:
    """One score per block of the main stack under criterion ``by`` (lower: more removable) on ``data``, an
    :class:`~layerscale.analysis.eval_data.evaluation.EvalSet` (``gamma`` reads only its inputs). The model must be on
    ``device``."""
    if by not in PRUNE_CRITERIA:
        raise ValueError(f"unknown pruning criterion {by!r}; allowed: {', '.join(PRUNE_CRITERIA)}")
    if by == "gamma":
        return gamma_scores(model, (inputs.to(device) for inputs, _ in data.batches(batch_size)))
    try:
        ranking = importlib.import_module("layerscale.analysis.pruning.block_ranking")
    except ModuleNotFoundError:
        raise ValueError(f"criterion {by!r} needs layerscale.analysis.pruning.block_ranking, which this installation "
                         f"lacks; use --by gamma or --blocks i,j") from None
    scores = ranking.rank_blocks(model, (data.inputs, data.targets), by, device=device, batch_size=batch_size,
                                 max_examples=None)
    return [float(s) for s in scores]


def blocks_to_remove(scores: Sequence[float], n: int) -> list[int]:
    """The ``n`` blocks of lowest score (ties: the deeper first), in increasing index order."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of blocks to remove must be an integer >= 1, got {n!r}")
    if n >= len(scores):
        raise ValueError(f"cannot remove {n} of {len(scores)} blocks: at least one must remain (N < {len(scores)})")
    order = sorted(range(len(scores)), key=lambda i: (scores[i], -i))
    return sorted(order[:n])
