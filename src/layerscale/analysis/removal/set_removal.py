"""The loss of a model with any set of blocks removed, on the cached streams, per example.

Removing a set ``S`` of blocks (0-based, contiguous or not) makes each removed block the identity
(``x^(l+1) = x^(l)`` for ``l ∈ S``) and runs the rest of the model
(:meth:`~layerscale.analysis.removal.streams.BlockStack.run_without`): the blocks before ``min S`` replay their cached
outputs, so one set costs the number of kept blocks after ``min S`` in block evaluations (a pruned model's own
forward, which :func:`layerscale.surgery.prune` builds, computes the same outputs). One clean capture per batch
serves every set.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .ablation import LossTotals
from ..eval_data.evaluation import EvalSet, logits_of, per_example_loss
from .streams import BlockStack

__all__ = ["set_cost", "set_losses"]


def set_cost(blocks: Sequence[int], depth: int) -> int:
    """Block evaluations per batch to measure the removal of ``blocks``: the kept blocks after the first removed."""
    removed = set(blocks)
    return sum(1 for i in range(min(removed), depth) if i not in removed) if removed else 0


def set_losses(stack: BlockStack, evalset: EvalSet, sets: Sequence[Sequence[int]], *, device: Any,
               batch_size: int, step: Callable[[], None] = lambda: None) -> tuple[LossTotals, LossTotals, int]:
    """``(clean, removed, outputs)``: per-example loss and accuracy of the full model (``clean``, one variant) and
    with each set of ``sets`` removed (``removed[i]`` for ``sets[i]``), over every example of ``evalset``, and the
    size of the logits' last dimension (classes or vocabulary entries). The model must be on ``device`` and in the
    mode the caller wants (eval); gradients are off."""
    clean, removed, outputs = LossTotals(1), LossTotals(len(sets)), 0
    name = stack.model_name
    with torch.inference_mode():
        for inputs, targets in evalset.batches(batch_size):
            inputs, targets = inputs.to(device), targets.to(device)
            captured = stack.capture_evaluation(inputs)
            logits = logits_of(captured.output, name)
            outputs = logits.shape[-1]
            clean.add(0, *per_example_loss(logits, targets))
            for index, blocks in enumerate(sets):
                logits = logits_of(stack.run_without(inputs, captured, blocks), name)
                removed.add(index, *per_example_loss(logits, targets))
                step()
            del captured
    return clean, removed, outputs
