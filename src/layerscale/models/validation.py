"""Checks of model hyper-parameters, each a one-line ``ValueError`` naming the value and what is allowed.

The depth and the width have an upper limit, checked before any module is built: every block is a few dozen Python
module objects even on the ``meta`` device, so ``depth: 100000`` exhausted the memory (5 GB, minutes) before the
check of the training memory could run. The limits are far above any trained model (DeepNet's 1,000 layers, a
16,384-wide LLM) and far below where building the module objects alone becomes a problem.

The number of parameters is bounded by this machine's memory (:func:`check_fits_memory`): sizes that are valid
numbers yet absurd together (``depth: 64, embed_dim: 65536`` in a hostile ``config.json`` is 3·10¹² parameters) ask
the allocator for terabytes, or get pages the kernel's out-of-memory killer later takes back. So a model is first
built on the ``meta`` device (shapes only, no memory) and refused when what its use holds exceeds physical memory:
``copies × P`` bytes for ``P`` bytes of parameters, plus the buffers once (training with AdamW: 4 copies, the
weights, their gradients and two moments; loading saved weights: 2, the model and the file's tensors).

Three sizes have their own limit because each alone reaches the allocator before that check runs: the MLP's hidden
width ``int(embed_dim * mlp_ratio)`` (``mlp_ratio: 1e9`` asked for a 16-billion-wide linear layer), a GPT's
``block_size`` (its position table holds ``block_size × embed_dim`` values, so ``block_size: 2**40`` asked for
terabytes) and its ``vocab_size`` (the token table, the same way). The limits are far above any trained model (a
4× MLP at the widest stream allowed, a context of a million positions, four million tokens) and far below sizes
that exhaust memory on their own.

Flags are checked by :func:`check_bool` (``True`` or ``False`` only, as ``grad_checkpointing`` and ``pretrained``
always were): the string ``"no"`` is truthy in Python, so accepting it silently built the opposite model.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable

import torch
from torch import nn

from .. import machine
from ..layers.drop_path import check_drop_probability

__all__ = ["MAX_BLOCK_SIZE", "MAX_DEPTH", "MAX_IMG_SIZE", "MAX_MLP_HIDDEN", "MAX_VOCAB_SIZE", "MAX_WIDTH",
           "check_bool", "check_fits_memory", "check_heads", "check_mlp_ratio", "check_patch", "check_positive_int",
           "check_positive_number", "check_rate", "model_bytes"]

#: The most blocks one stack of a model may have (``depth``, CaiT's ``depth_token_only``).
MAX_DEPTH = 1024
#: The widest residual stream a model may have (``embed_dim``).
MAX_WIDTH = 65536
#: The largest image side a vision model may take (``img_size``): checked before the allowed patch sizes are listed
#: (one step per pixel) and before the position embedding is built, so ``img_size: 1000000000000`` in a hostile
#: ``config.json`` is one line, not an endless loop or torch's multi-kB overflow message.
MAX_IMG_SIZE = 65536
#: The widest MLP hidden layer a block may have (``int(embed_dim * mlp_ratio)``): ratio 4 at the widest stream.
MAX_MLP_HIDDEN = 4 * MAX_WIDTH
#: The most positions a GPT may embed (``block_size``): a million, beyond any trained context of this model family.
MAX_BLOCK_SIZE = 2**20
#: The largest vocabulary a GPT may embed (``vocab_size``): 16 times today's largest LLM tokenizers (~256k).
MAX_VOCAB_SIZE = 2**22


def check_positive_int(name: str, value, high: int | None = None) -> int:
    """``value`` when it is an int in ``[1, high]`` (no upper limit without ``high``), else a one-line
    ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be at most {high} (this library's limit), got {value}")
    return value


def check_heads(embed_dim: int, num_heads: int) -> None:
    check_positive_int("embed_dim", embed_dim, MAX_WIDTH)
    check_positive_int("num_heads", num_heads)
    if embed_dim % num_heads:
        divisors = [h for h in range(1, min(embed_dim, 64) + 1) if embed_dim % h == 0]
        raise ValueError(
            f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}; allowed num_heads: {divisors}"
        )


def check_patch(img_size: int, patch_size: int) -> None:
    check_positive_int("img_size", img_size, MAX_IMG_SIZE)
    check_positive_int("patch_size", patch_size, MAX_IMG_SIZE)
    if img_size % patch_size:
        divisors = [p for p in range(1, img_size + 1) if img_size % p == 0]
        raise ValueError(
            f"img_size {img_size} is not divisible by patch_size {patch_size}; allowed patch_size: {divisors}"
        )


def check_rate(name: str, value: float) -> float:
    """``float(value)`` when it is a real number in ``[0, 1)`` (a dropout rate), else a one-line ``ValueError``
    (booleans and strings are refused, not converted)."""
    return check_drop_probability(name, value)


def check_positive_number(name: str, value) -> float:
    """``float(value)`` when it is a finite real number > 0 (an int, a float, a numpy scalar; not a bool or a
    string), else a one-line ``ValueError``."""
    if (isinstance(value, (bool, str, bytes)) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_bool(name: str, value) -> bool:
    """``value`` when it is ``True`` or ``False`` (``numpy.bool_`` too), else a one-line ``ValueError``: ints such as
    ``0`` / ``1``, strings such as ``"no"`` and ``None`` are refused, never read as truthy or falsy."""
    if isinstance(value, bool):
        return value
    numpy = sys.modules.get("numpy")  # a numpy bool can only exist once numpy is imported
    if numpy is not None and isinstance(value, numpy.bool_):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def check_mlp_ratio(embed_dim: int, mlp_ratio) -> int:
    """The MLP hidden width ``int(embed_dim * mlp_ratio)`` when ``mlp_ratio`` is a finite number > 0 and the width
    is in ``[1, MAX_MLP_HIDDEN]``, else a one-line ``ValueError`` (``embed_dim`` is checked before)."""
    check_positive_number("mlp_ratio", mlp_ratio)
    hidden = int(embed_dim * mlp_ratio)
    if hidden < 1:
        raise ValueError(f"mlp_ratio must be a number > 0 with int(embed_dim * mlp_ratio) >= 1, got {mlp_ratio!r} "
                         f"(embed_dim {embed_dim})")
    if hidden > MAX_MLP_HIDDEN:
        raise ValueError(f"mlp_ratio {mlp_ratio!r} gives an MLP hidden width int(embed_dim * mlp_ratio) = {hidden} "
                         f"(embed_dim {embed_dim}), more than {MAX_MLP_HIDDEN} (this library's limit)")
    return hidden


def model_bytes(model: nn.Module, copies: int, dtype: torch.dtype | None = None) -> int:
    """``copies ×`` the bytes of ``model``'s parameters plus its buffers once; floating tensors counted in
    ``dtype`` when given (the dtype the model will be loaded in), else in their own."""
    def size(tensor: torch.Tensor) -> int:
        return tensor.numel() * (dtype.itemsize if dtype is not None and tensor.is_floating_point()
                                 else tensor.element_size())
    return copies * sum(map(size, model.parameters())) + sum(map(size, model.buffers()))


def check_fits_memory(build: Callable[[], nn.Module], what: str, use: str, copies: int, holding: str,
                      dtype: torch.dtype | None = None) -> None:
    """A one-line ``ValueError`` when the model ``build()`` makes needs more than this machine's memory for ``use``.

    ``build`` runs on the ``meta`` device (nothing is allocated); its ``TypeError`` / ``ValueError`` (arguments it
    refuses) propagate, and a model with an operation the ``meta`` device lacks passes unchecked (the real build
    decides). ``what`` names the model in the message (``"model 'vit'"``, a ``config.json``), ``use`` what is done
    with it (``"training it"``, ``"loading it"``) and ``holding`` what its ``copies`` of the weights are; ``dtype``
    the floating dtype they will have, when not the one ``build`` gives them.
    """
    try:
        with torch.device("meta"):
            shapes = build()
    except (RuntimeError, NotImplementedError):
        return
    memory, needed = machine.machine_memory_bytes(), model_bytes(shapes, copies, dtype)
    if memory is not None and needed > memory:
        count = sum(p.numel() for p in shapes.parameters())
        raise ValueError(f"{what}: {count:,} parameters; {use} needs at least {needed / 2**30:,.1f} GiB "
                         f"({holding}), more than this machine's {memory / 2**30:,.1f} GiB; "
                         f"lower embed_dim, depth or mlp_ratio")
