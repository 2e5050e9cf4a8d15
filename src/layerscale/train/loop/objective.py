"""What the trainer minimises and reports for one batch: the loss, the correct predictions and the count.

Default objective (``loss_fn=None``), cross-entropy over class logits:

* ``kind == "text"``: next-token logits ``(B, T, V)`` against next-token ids ``(B, T)``; every position is one
  classification, ``n = B·T`` (the dataset yields ``(tokens, tokens shifted by one)``).
* any other kind (``"image"``, ``"classification"``): logits ``(B, C)`` against class ids ``(B,)``, ``n = B``.

``loss = CE(softmax(logits), y)`` with label smoothing ε (Szegedy et al., 2016, eq. 1 of §7:
``q' = (1 - ε)·onehot(y) + ε/C``) in training and none in evaluation; accuracy is ``argmax(logits) == y``.

A target equal to :data:`IGNORE_INDEX` (``-100``: PyTorch's ``cross_entropy`` default, and the label Hugging Face
pads sequences with) is left out of all three: the loss (as ``cross_entropy`` leaves it out), the correct count and
``n``, so that a padded batch's loss, accuracy and perplexity are those of its real targets. (Until 2026-12-07 ``n``
counted the padding: every pad was a free perfect token, and a padded evaluation's perplexity read 60.6 for 159.5.)
A training batch whose every target is ignored has no loss (``nan``).

A user loss (``loss_fn(output, target) -> scalar``, mean over the batch) replaces the cross-entropy; ``n`` is then
the batch size, the evaluation loss is the batch-size-weighted mean of ``loss_fn`` over batches, and accuracy is
counted only when the output and target have the default objective's shapes (else it is ``nan`` and left out of
the records).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

__all__ = ["IGNORE_INDEX", "LossFn", "batch_objective", "eval_objective"]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: the target that marks a position to leave out (``torch.nn.functional.cross_entropy``'s ``ignore_index``)
IGNORE_INDEX = -100


def _counted(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(correct, n)`` over the positions whose target is not :data:`IGNORE_INDEX` (tensors: no device sync)."""
    kept = labels != IGNORE_INDEX
    return ((logits.argmax(-1) == labels) & kept).sum(), kept.sum()


def _class_view(output: torch.Tensor, target: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(logits (N, C), labels (N,))`` when ``output`` / ``target`` are class logits and ids, else ``None``."""
    if not isinstance(output, torch.Tensor) or not isinstance(target, torch.Tensor):
        return None
    if target.is_floating_point() or target.is_complex() or output.dim() != target.dim() + 1:
        return None
    if output.shape[:-1] != target.shape:
        return None
    if kind == "text" or output.dim() > 2:
        return output.reshape(-1, output.shape[-1]), target.reshape(-1)
    return output, target


def _default_view(output: torch.Tensor, target: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    view = _class_view(output, target, kind)
    if view is None:
        out_shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        tgt_shape = tuple(target.shape) if isinstance(target, torch.Tensor) else type(target).__name__
        raise ValueError(f"the default loss takes class logits (B, C) with integer targets (B,), or next-token "
                         f"logits (B, T, V) with targets (B, T); got output {out_shape} and target {tgt_shape}: "
                         "pass loss_fn=")
    return view


def batch_objective(output: torch.Tensor, target: torch.Tensor, kind: str, loss_fn: LossFn | None,
                    label_smoothing: float) -> tuple[torch.Tensor, torch.Tensor, int | torch.Tensor]:
    """Training ``(loss, correct, n)`` of one batch (``correct`` is a tensor, ``nan`` when undefined; ``n`` an int,
    or a tensor counting the targets not ignored)."""
    if loss_fn is None:
        logits, labels = _default_view(output, target, kind)
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing, ignore_index=IGNORE_INDEX)
        with torch.no_grad():
            correct, n = _counted(logits, labels)
        return loss, correct, n
    loss = loss_fn(output, target)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ValueError(f"loss_fn must return a scalar tensor, got {type(loss).__name__}"
                         f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}")
    loss = loss.reshape(())
    return loss, _correct_or_nan(output, target, kind, loss.device), len(target)


def eval_objective(output: torch.Tensor, target: torch.Tensor, kind: str,
                   loss_fn: LossFn | None) -> tuple[torch.Tensor, torch.Tensor, int | torch.Tensor]:
    """Evaluation ``(summed loss, correct, n)`` of one batch (no label smoothing; ignored targets left out)."""
    if loss_fn is None:
        logits, labels = _default_view(output, target, kind)
        loss_sum = F.cross_entropy(logits.float(), labels, reduction="sum", ignore_index=IGNORE_INDEX)
        return (loss_sum, *_counted(logits, labels))
    n = len(target)
    loss_sum = loss_fn(output, target).detach().float().reshape(()) * n
    return loss_sum, _correct_or_nan(output, target, kind, loss_sum.device), n


def _correct_or_nan(output: torch.Tensor, target: torch.Tensor, kind: str, device: torch.device) -> torch.Tensor:
    view = _class_view(output, target, kind)
    if view is None:
        return torch.tensor(float("nan"), device=device)
    with torch.no_grad():
        logits, labels = view
        # Accuracy per sample for sequence targets would double count: n is the batch size here.
        return (logits.argmax(-1) == labels).float().sum() * (len(target) / max(labels.numel(), 1))
