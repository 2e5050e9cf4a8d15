"""Block ablation and early exit on cached streams, summed over the evaluation set.

**Ablation** of block ``l`` sets ``x_{l+1} = x_l`` (the block becomes the identity) and runs the rest of the model:
the change of the evaluation loss and accuracy is what the block contributes, the layer-pruning measure of
Gromov et al. 2024 (arXiv 2403.17887) and Sun et al. 2025 (arXiv 2502.05795). **Early exit** after ``k`` blocks
sets every later block to the identity, so the stream ``x_k`` goes straight through the model's final norm and head
(for a language model that is the logit lens, nostalgebraist 2020, "interpreting GPT: the logit lens").

Both reuse the streams cached by :meth:`BlockStack.capture`: ablating block ``l`` evaluates only the ``L − l``
blocks after it, so ablating every block costs ``L(L − 1)/2`` block evaluations per batch (plus one clean pass),
not ``L²``; the ``L`` early exits evaluate no block at all (only the embedding, final norm and head).
"""

from __future__ import annotations

from typing import Callable

import torch

from .evaluation import logits_of, per_example_loss
from .streams import BlockStack, CapturedBatch

__all__ = ["LossTotals", "ablate_each_block", "exit_after_each_block"]


class LossTotals:
    """Sums of per-example loss and accuracy for ``n`` model variants (mean = sum / number of examples)."""

    def __init__(self, n: int) -> None:
        self.loss = torch.zeros(n, dtype=torch.float64)
        self.accuracy = torch.zeros(n, dtype=torch.float64)

    def add(self, index: int, loss: torch.Tensor, accuracy: torch.Tensor) -> None:
        self.loss[index] += loss.sum().cpu()
        self.accuracy[index] += accuracy.sum().cpu()

    def means(self, count: int) -> tuple[list[float], list[float]]:
        return (self.loss / count).tolist(), (self.accuracy / count).tolist()


def ablate_each_block(stack: BlockStack, inputs: torch.Tensor, targets: torch.Tensor, captured: CapturedBatch,
                      totals: LossTotals, step: Callable[[], None] = lambda: None) -> None:
    """Add, for every block ``l``, the batch's loss and accuracy with block ``l`` ablated to ``totals[l]``."""
    for index in range(stack.depth):
        logits = logits_of(stack.run_ablated(inputs, captured, index), stack.model_name)
        totals.add(index, *per_example_loss(logits, targets))
        step()


def exit_after_each_block(stack: BlockStack, inputs: torch.Tensor, targets: torch.Tensor, captured: CapturedBatch,
                          clean_logits: torch.Tensor, totals: LossTotals,
                          step: Callable[[], None] = lambda: None) -> None:
    """Add, for every ``k = 0 … L``, the batch's loss and accuracy keeping only the first ``k`` blocks to
    ``totals[k]`` (``k = L`` is the full model: its clean logits are reused)."""
    for keep in range(stack.depth):
        logits = logits_of(stack.run_truncated(inputs, captured, keep), stack.model_name)
        totals.add(keep, *per_example_loss(logits, targets))
        step()
    totals.add(stack.depth, *per_example_loss(clean_logits, targets))
