"""Weights that would load as wrong weights, refused before they are loaded.

``nn.Module.load_state_dict`` copies a tensor into a parameter of the same shape whatever its dtype and values: an
integer or boolean tensor where the model has a float is cast without a word (a foreign file, not weights of this
model), and NaN or infinite weights load as they are (every output computed from them is meaningless; attention on
the CPU turns NaN rows into zeros, so the logits may even look finite). A loader that either loads correctly or
refuses checks both first (:func:`check_loadable_weights`): ``from_pretrained``, ``load_pretrained_into`` and a
training run read as a source. Between the native floating dtypes (float16, bfloat16, float32, float64) loading
casts, as every library does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from .messages import shown_name

__all__ = ["CASTABLE_FLOATS", "check_finite_tensors", "check_loadable_weights", "first_nonfinite", "foreign_dtypes"]

#: Floating dtypes between which loading casts (a float16 checkpoint into a float32 model, and back).
CASTABLE_FLOATS = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})


def first_nonfinite(named: Iterable[tuple[str, torch.Tensor]]) -> tuple[str, int] | None:
    """``(name, count of NaN/inf values)`` of the first floating tensor in ``named`` that holds one, else ``None``."""
    for name, tensor in named:
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            if tensor.dtype not in CASTABLE_FLOATS:  # float8 kinds have no isfinite; float32 holds them exactly
                tensor = tensor.float()
            finite = torch.isfinite(tensor)
            if not bool(finite.all()):
                return name, int((~finite).sum())
    return None


def foreign_dtypes(saved: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor]) -> list[str]:
    """``"key saved-dtype vs model-dtype"`` for every key of both whose dtypes differ and are not both in
    :data:`CASTABLE_FLOATS` (an integer, boolean or float8 tensor where the model has a float, or the reverse)."""
    return [f"{shown_name(k)} {saved[k].dtype} vs {expected[k].dtype}" for k in expected
            if k in saved and saved[k].dtype != expected[k].dtype
            and not {saved[k].dtype, expected[k].dtype} <= CASTABLE_FLOATS]


def check_loadable_weights(saved: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor],
                           source: str) -> None:
    """One-line ``ValueError`` naming ``source`` and the first keys of ``saved`` (the weights read) that would load
    into a model whose state dict is ``expected`` as wrong weights: a foreign dtype (:func:`foreign_dtypes`) or NaN
    / infinite values (:func:`first_nonfinite`). Keys and shapes are the caller's check."""
    foreign = foreign_dtypes(saved, expected)
    if foreign:
        more = f" (+{len(foreign) - 3} more)" if len(foreign) > 3 else ""
        raise ValueError(f"{source}: tensors of another dtype than the model's (checkpoint vs model) "
                         f"[{', '.join(foreign[:3])}]{more}; loading would cast them: not weights of this model")
    check_finite_tensors(saved, source)


def check_finite_tensors(tensors: Mapping[str, torch.Tensor], source: str) -> None:
    """One-line ``ValueError`` naming the first tensor of ``tensors`` (a state dict read from ``source``) holding NaN
    or infinity."""
    found = first_nonfinite(tensors.items())
    if found is not None:
        raise ValueError(f"{source}: tensor {found[0]!r} holds {found[1]} NaN or infinite value(s); a model with "
                         "non-finite weights is refused")
