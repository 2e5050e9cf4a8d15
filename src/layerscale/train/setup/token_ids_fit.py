"""A user's token data checked against the user's model before the run directory is made.

A language model given to ``run(model=...)`` with data holding a token id it has no embedding row for (a tokenizer
of 400 ids, a model of ``vocab_size`` 300) fails only at its first training step, with the run directory already
made. So the ids are compared with the model's input embedding first, in one line naming the data, the ids found and
the rows the model has.

* The model's rows: :func:`~layerscale.token_limits.input_embedding_rows` (its ``get_input_embeddings()``,
  else its ``vocab_size``). A model with neither is not checked here: its first step then fails, and the run's
  start is undone (:mod:`~layerscale.train.state.failed_start`).
* The ids: the inputs of ``(inputs, target)`` samples when they are integer tensors. A ``TensorDataset`` is read
  whole (one min / max over its input tensor); any other dataset by its first :data:`SAMPLES` samples, so an
  out-of-range id further on still stops the run at the step that reads it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from ...token_limits import input_embedding_rows

__all__ = ["SAMPLES", "check_token_ids_fit"]

#: how many samples of a dataset that does not hold its tensors are read for the check
SAMPLES = 1000


def _integer_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype != torch.bool and not (
        value.is_floating_point() or value.is_complex())


def _id_range(dataset: Dataset) -> tuple[int, int, str] | None:
    """``(lowest, highest, where)`` over the inputs of ``dataset`` that are token ids; ``None`` when there are none."""
    if isinstance(dataset, TensorDataset):
        inputs = dataset.tensors[0]
        if not _integer_tensor(inputs) or inputs.numel() == 0:
            return None
        low, high = torch.aminmax(inputs)
        return int(low), int(high), f"all {len(dataset):,} samples"
    low = high = None
    count = min(len(dataset), SAMPLES)
    for index in range(count):
        sample = dataset[index]
        if not isinstance(sample, (tuple, list)) or len(sample) != 2 or not _integer_tensor(sample[0]):
            return None  # not token ids: nothing to compare
        if sample[0].numel() == 0:
            continue
        lo, hi = (int(v) for v in torch.aminmax(sample[0]))
        low, high = (lo, hi) if low is None else (min(low, lo), max(high, hi))
    if low is None:
        return None
    return low, high, f"all {count:,} samples" if count == len(dataset) else f"its first {count:,} samples"


def check_token_ids_fit(model: nn.Module, dataset: Dataset, role: str) -> None:
    """A one-line ``ValueError`` naming ``role`` (``"train_data"``, ``"eval_data"``) when ``dataset``'s input token
    ids fall outside ``[0, rows)`` of ``model``'s input embedding; nothing when the rows or the ids are unknown."""
    rows = input_embedding_rows(model)
    if rows is None:
        return
    found = _id_range(dataset)
    if found is None:
        return
    low, high, where = found
    if low < 0 or high >= rows:
        raise ValueError(f"{role}: token ids must be in [0, {rows}) for the {rows} input embedding rows of "
                         f"{type(model).__name__}, got ids from {low} to {high} (in {where}); the data's vocabulary "
                         f"(its tokenizer) must fit the model's vocab_size")
