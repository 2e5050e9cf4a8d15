"""Building the model a config names, refusing in one line what cannot be built or cannot fit this machine.

The model's constructor checks its own arguments (``ValueError``), but a value of the wrong type for an argument
without a typed default (``TypeError``) and sizes that are valid numbers yet absurd are only found by building. So
the model is first built on the ``meta`` device and refused when training it needs more than this machine's memory
(:func:`~layerscale.models.validation.check_fits_memory`: the weights, their gradients and AdamW's two moments,
``4 × P`` bytes for ``P`` bytes of parameters, buffers once). Only then is it built for real.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ...messages import shown_name, shown_value
from ...models.registry import create_model
from ...models.validation import check_fits_memory

__all__ = ["build_model"]


def _refusal(name: str, exc: BaseException) -> ValueError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ValueError(f"model {shown_value(name)}: cannot be built with these arguments ({shown_name(first, 300)})")


def build_model(name: str, args: dict[str, Any]) -> nn.Module:
    """``create_model(name, **args)``, or one ``ValueError`` naming the model when its arguments do not build or
    training it would not fit in this machine's memory (see the module docstring)."""
    try:
        check_fits_memory(lambda: create_model(name, **args), f"model {shown_value(name)}", "training it", 4,
                          "weights, gradients and two AdamW moments")
    except TypeError as exc:  # a value of the wrong type for an argument whose default is None
        raise _refusal(name, exc) from None
    try:
        return create_model(name, **args)
    except (TypeError, RuntimeError, MemoryError) as exc:
        raise _refusal(name, exc) from None
