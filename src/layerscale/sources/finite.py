"""A model or a state dict with NaN or infinite weights is refused, naming the first offending tensor.

A non-finite weight makes every loss, score and perplexity computed from the model meaningless (and a pruned,
grown or folded copy inherits it), so ``analyze``, ``prune``, ``grow`` and ``fold`` check before any work.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import torch
from torch import nn

__all__ = ["first_nonfinite", "check_finite_model", "check_finite_tensors"]

_NATIVE = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def first_nonfinite(named: Iterable[tuple[str, torch.Tensor]]) -> tuple[str, int] | None:
    """``(name, count of NaN/inf values)`` of the first floating tensor in ``named`` that holds one, else ``None``."""
    for name, tensor in named:
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            if tensor.dtype not in _NATIVE:  # float8 kinds have no isfinite; float32 holds their values exactly
                tensor = tensor.float()
            finite = torch.isfinite(tensor)
            if not bool(finite.all()):
                return name, int((~finite).sum())
    return None


def check_finite_tensors(tensors: Mapping[str, torch.Tensor], source: str) -> None:
    """One-line ``ValueError`` naming the first tensor of ``tensors`` (a state dict read from ``source``) holding NaN
    or infinity."""
    found = first_nonfinite(tensors.items())
    if found is not None:
        raise ValueError(f"{source}: tensor {found[0]!r} holds {found[1]} NaN or infinite value(s); a model with "
                         "non-finite weights is refused")


def check_finite_model(model: nn.Module, source: str | None = None) -> None:
    """One-line ``ValueError`` naming the first parameter or floating buffer of ``model`` holding NaN or infinity."""
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        found = first_nonfinite(named)
        if found is not None:
            where = f"{source}: " if source else ""
            raise ValueError(f"{where}{type(model).__name__}: {kind} {found[0]!r} holds {found[1]} NaN or infinite "
                             "value(s); a model with non-finite weights cannot be analysed or edited")
