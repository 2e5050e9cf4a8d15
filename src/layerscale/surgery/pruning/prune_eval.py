"""The metric of a model on an evaluation set, and the table ``layerscale prune`` prints: loss (and accuracy)
after removing the ``n`` most removable blocks by each criterion, ``n = 0 … N``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...analysis.eval_data.evaluation import EvalSet, logits_of, per_example_loss, task_of
from .prune import blocks_to_remove, prune

__all__ = ["Metric", "evaluate", "removal_curve"]


@dataclass(frozen=True)
class Metric:
    """Mean cross-entropy and top-1 accuracy over the examples (per-position means for a language model)."""

    loss: float
    accuracy: float


@torch.no_grad()
def evaluate(model: nn.Module, data: EvalSet, *, device: str = "cpu", batch_size: int = 250) -> Metric:
    """:class:`Metric` of ``model`` (in eval mode, on ``device``) over every example of ``data``."""
    was_training = model.training
    model.eval()
    try:
        losses, correct = [], []
        name = type(model).__name__
        for inputs, targets in data.batches(batch_size):
            logits = logits_of(model(inputs.to(device)), name)
            targets = targets.to(device)
            task_of(logits, targets, name)
            loss, acc = per_example_loss(logits, targets)
            losses.append(loss.cpu())
            correct.append(acc.cpu())
    finally:
        model.train(was_training)
    return Metric(float(torch.cat(losses).mean()), float(torch.cat(correct).mean()))


def removal_curve(model: nn.Module, scores: list[float], n_max: int, data: EvalSet, *, device: str = "cpu",
                  batch_size: int = 250) -> list[tuple[int, list[int], Metric]]:
    """``[(n, blocks removed, metric)]`` for ``n = 0 … n_max``, removing the ``n`` lowest-score blocks."""
    rows = [(0, [], evaluate(model, data, device=device, batch_size=batch_size))]
    for n in range(1, n_max + 1):
        removed = blocks_to_remove(scores, n)
        rows.append((n, removed, evaluate(prune(model, removed), data, device=device, batch_size=batch_size)))
    return rows
