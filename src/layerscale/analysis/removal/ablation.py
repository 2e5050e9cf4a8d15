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

from ..eval_data.evaluation import logits_of, per_example_loss
from .streams import BlockStack, CapturedBatch

__all__ = ["LossTotals", "ablate_each_block", "exit_after_each_block"]


class LossTotals:
    """Per-example loss and accuracy for ``n`` model variants, batch after batch (the bootstrap resamples the
    examples, so every example's value is kept: ``n · examples`` float64 values)."""

    def __init__(self, n: int) -> None:
        self._loss: list[list[torch.Tensor]] = [[] for _ in range(n)]
        self._accuracy: list[list[torch.Tensor]] = [[] for _ in range(n)]

    def add(self, index: int, loss: torch.Tensor, accuracy: torch.Tensor) -> None:
        self._loss[index].append(loss.detach().double().cpu())
        self._accuracy[index].append(accuracy.detach().double().cpu())

    def per_example(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, accuracy)``, each ``(examples, n)``: column ``i`` holds variant ``i``'s values."""
        return (torch.stack([torch.cat(chunks) for chunks in self._loss], dim=1),
                torch.stack([torch.cat(chunks) for chunks in self._accuracy], dim=1))

    def means(self, count: int | None = None) -> tuple[list[float], list[float]]:
        """Mean loss and accuracy of each variant over the examples added (``count``, when given, must match)."""
        loss, accuracy = self.per_example()
        if count is not None and loss.shape[0] != count:
            raise ValueError(f"{loss.shape[0]} examples were added, expected {count}")
        return loss.mean(dim=0).tolist(), accuracy.mean(dim=0).tolist()


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
