"""Building the model a config names, refusing in one line what cannot be built or cannot fit this machine.

The model's constructor checks its own arguments (``ValueError``), but a value of the wrong type for an argument
without a typed default (``TypeError``) and sizes that are valid numbers yet absurd are only found by building:
``embed_dim: 100000000`` asks the allocator for 10^17 bytes (a ``RuntimeError`` from deep inside ``nn.Linear``),
and a size that the allocator does grant may only fail much later, in the kernel's out-of-memory killer. So the
model is first built on the ``meta`` device (shapes only, no memory, milliseconds), and refused when training it
needs more than this machine's memory: the weights, their gradients and AdamW's two moments, ``4 × P`` bytes for
``P`` bytes of parameters (buffers once). Only then is it built for real.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

from ...messages import shown_name, shown_value
from ...models.registry import create_model

__all__ = ["build_model", "machine_memory_bytes", "training_bytes"]


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine in bytes, or ``None`` where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def training_bytes(model: nn.Module) -> int:
    """Bytes that training ``model`` with AdamW holds at least: ``4 ×`` its parameters (weights, gradients, two
    moments) plus its buffers."""
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return 4 * parameters + buffers


def _refusal(name: str, exc: BaseException) -> ValueError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ValueError(f"model {shown_value(name)}: cannot be built with these arguments ({shown_name(first, 300)})")


def build_model(name: str, args: dict[str, Any]) -> nn.Module:
    """``create_model(name, **args)``, or one ``ValueError`` naming the model when its arguments do not build or
    training it would not fit in this machine's memory (see the module docstring)."""
    try:
        with torch.device("meta"):
            shapes = create_model(name, **args)
    except TypeError as exc:  # a value of the wrong type for an argument whose default is None
        raise _refusal(name, exc) from None
    except (RuntimeError, NotImplementedError):
        shapes = None  # an operation without a meta kernel: the real build below decides
    memory = machine_memory_bytes()
    if shapes is not None and memory is not None:
        needed = training_bytes(shapes)
        if needed > memory:
            count = sum(p.numel() for p in shapes.parameters())
            raise ValueError(f"model {shown_value(name)}: {count:,} parameters; training it needs at least "
                             f"{needed / 2**30:,.1f} GiB (weights, gradients and two AdamW moments), more than this "
                             f"machine's {memory / 2**30:,.1f} GiB; lower embed_dim, depth or mlp_ratio")
    try:
        return create_model(name, **args)
    except (TypeError, RuntimeError, MemoryError) as exc:
        raise _refusal(name, exc) from None
