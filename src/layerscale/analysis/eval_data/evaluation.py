"""The evaluation set of a depth analysis: inputs and targets as tensors, the task they define, and its loss.

Accepted forms of ``data`` (everything is gathered into two tensors first; an evaluation set of a few thousand
examples fits in memory, and the analysis then batches it itself):

* ``(inputs, targets)``: two tensors with the same first dimension;
* an integer tensor ``(N, T)`` of token ids: a language-model set, ``inputs = ids[:, :-1]``, ``targets = ids[:, 1:]``;
* a map-style :class:`torch.utils.data.Dataset` or any iterable of ``(input, target)`` examples;
* a :class:`torch.utils.data.DataLoader` (or any iterable) of ``(inputs, targets)`` batches.

The task is read from the model's output: logits ``(B, C)`` with targets ``(B,)`` is **classification**
(per-example cross-entropy and top-1 accuracy); logits ``(B, T, V)`` with targets ``(B, T)`` is a **language
model** (per-sequence mean next-token cross-entropy and top-1 next-token accuracy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

__all__ = ["EvalSet", "as_eval_set", "logits_of", "task_of", "per_example_loss", "CLASSIFICATION", "LANGUAGE_MODEL"]

CLASSIFICATION = "classification"
LANGUAGE_MODEL = "language_model"


@dataclass(frozen=True)
class EvalSet:
    """``inputs`` and ``targets`` of ``len(self)`` examples (first dimension), kept on the CPU."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def batches(self, batch_size: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        for start in range(0, len(self), batch_size):
            yield self.inputs[start:start + batch_size], self.targets[start:start + batch_size]


def _as_tensor(value: Any, what: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"evaluation data: {what} is a {type(value).__name__}, expected a tensor") from None


def _pair(item: Any, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise ValueError(f"evaluation data: {where} is a {type(item).__name__}"
                         f"{f' of length {len(item)}' if isinstance(item, (tuple, list)) else ''}, expected an "
                         "(input, target) pair")
    return _as_tensor(item[0], f"the input of {where}"), _as_tensor(item[1], f"the target of {where}")


def _gather(data: Any, max_examples: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(data, EvalSet):  # already gathered: its first max_examples examples
        return data.inputs[:max_examples], data.targets[:max_examples]
    if isinstance(data, torch.Tensor):
        if data.dtype.is_floating_point or data.dim() != 2 or data.shape[1] < 2:
            raise ValueError(f"evaluation data: a bare tensor must hold token ids of shape (N, T >= 2), got "
                             f"{tuple(data.shape)} {data.dtype}; give (inputs, targets) for other tasks")
        data = data[:max_examples] if max_examples is not None else data
        return data[:, :-1], data[:, 1:]
    if isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data):
        inputs, targets = data
        if inputs.dim() == 0 or targets.dim() == 0 or inputs.shape[0] != targets.shape[0]:
            raise ValueError(f"evaluation data: inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} "
                             "must have the same first dimension (the number of examples)")
        if max_examples is not None:
            inputs, targets = inputs[:max_examples], targets[:max_examples]
        return inputs, targets
    if isinstance(data, DataLoader):
        batched, items = True, iter(data)
    elif isinstance(data, Dataset) and hasattr(data, "__len__"):
        batched, items = False, (data[i] for i in range(len(data)))
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes)):
        batched, items = None, iter(data)
    else:
        raise ValueError(f"evaluation data is a {type(data).__name__}; expected (inputs, targets) tensors, token "
                         "ids (N, T), a Dataset of (input, target) examples or a DataLoader")
    inputs, targets, count = [], [], 0
    for n, item in enumerate(items):
        x, y = _pair(item, f"item {n}")
        if batched is None:  # a plain iterable: batches when the target has the input's leading dimension
            batched = x.dim() > 0 and y.dim() > 0 and x.shape[0] == y.shape[0] and x.dim() >= 2
        if not batched:
            x, y = x.unsqueeze(0), y.unsqueeze(0)
        inputs.append(x)
        targets.append(y)
        count += x.shape[0]
        if max_examples is not None and count >= max_examples:
            break
    if not inputs:
        raise ValueError("evaluation data is empty: no examples to analyse")
    shapes = {tuple(x.shape[1:]) for x in inputs}
    if len(shapes) > 1:
        raise ValueError(f"evaluation data: examples of different shapes {sorted(shapes)[:3]}; expected one shape")
    inputs_t, targets_t = torch.cat(inputs), torch.cat(targets)
    if max_examples is not None:
        inputs_t, targets_t = inputs_t[:max_examples], targets_t[:max_examples]
    return inputs_t, targets_t


def as_eval_set(data: Any, max_examples: int | None = None) -> EvalSet:
    """Gather ``data`` (see the module docstring) into an :class:`EvalSet` of at most ``max_examples`` examples.

    Raises a one-line ``ValueError`` for an empty set, mismatched lengths, non-integer targets or an unknown form.
    """
    if max_examples is not None and (isinstance(max_examples, bool) or not isinstance(max_examples, int)
                                     or max_examples < 1):
        raise ValueError(f"max_examples must be a positive int or None, got {max_examples!r}")
    inputs, targets = _gather(data, max_examples)
    if len(inputs) == 0:
        raise ValueError("evaluation data is empty: no examples to analyse")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise ValueError(f"evaluation data: targets must be integer class or token ids, got dtype {targets.dtype}")
    if int(targets.min()) < 0:
        raise ValueError(f"evaluation data: targets must be >= 0, found {int(targets.min())}")
    return EvalSet(inputs.cpu(), targets.long().cpu())


def logits_of(output: Any, model_name: str) -> torch.Tensor:
    """The logits in a model's output: the tensor itself, ``output.logits`` (Hugging Face) or its first element."""
    if isinstance(output, torch.Tensor):
        return output
    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise ValueError(f"{model_name}: cannot find logits in its output of type {type(output).__name__}")


def task_of(logits: torch.Tensor, targets: torch.Tensor, model_name: str) -> str:
    """``CLASSIFICATION`` or ``LANGUAGE_MODEL`` from the shapes; ``ValueError`` when the targets do not fit."""
    if logits.dim() == 2 and targets.dim() == 1 and logits.shape[0] == targets.shape[0]:
        task = CLASSIFICATION
    elif logits.dim() == 3 and targets.shape == logits.shape[:2]:
        task = LANGUAGE_MODEL
    else:
        raise ValueError(f"{model_name}: its output {tuple(logits.shape)} does not fit targets "
                         f"{tuple(targets.shape)}; expected logits (B, classes) with labels (B,) or logits "
                         "(B, T, vocab) with next tokens (B, T)")
    classes = logits.shape[-1]
    if int(targets.max()) >= classes:
        what = "classes" if task == CLASSIFICATION else "vocabulary entries"
        raise ValueError(f"evaluation data has target {int(targets.max())} but {model_name} has {classes} {what}; "
                         "the evaluation set does not fit this model")
    return task


def per_example_loss(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, accuracy)`` per example, float64: cross-entropy (averaged over a sequence's positions for a
    language model) and top-1 accuracy (likewise averaged)."""
    logits = logits.float()
    if logits.dim() == 2:
        loss = F.cross_entropy(logits, targets, reduction="none")
        correct = (logits.argmax(-1) == targets).float()
        return loss.double(), correct.double()
    loss = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").mean(1)
    correct = (logits.argmax(-1) == targets).float().mean(1)
    return loss.double(), correct.double()
