"""A model or a state dict with NaN or infinite weights is refused, naming the first offending tensor.

A non-finite weight makes every loss, score and perplexity computed from the model meaningless (and a pruned,
grown, folded or converted copy inherits it), so ``analyze``, ``prune``, ``grow``, ``fold`` and ``convert`` check
before any work (the loaders already refuse non-finite weights they read: :mod:`layerscale.weight_checks`).
"""

from __future__ import annotations

from torch import nn

from ..weight_checks import check_finite_tensors, first_nonfinite

__all__ = ["first_nonfinite", "check_finite_model", "check_finite_tensors"]


def check_finite_model(model: nn.Module, source: str | None = None) -> None:
    """One-line ``ValueError`` naming the first parameter or floating buffer of ``model`` holding NaN or infinity."""
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        found = first_nonfinite(named)
        if found is not None:
            where = f"{source}: " if source else ""
            raise ValueError(f"{where}{type(model).__name__}: {kind} {found[0]!r} holds {found[1]} NaN or infinite "
                             "value(s); a model with non-finite weights cannot be analysed or edited")
