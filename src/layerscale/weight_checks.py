"""Weights that would load as wrong weights, refused before they are loaded.

``nn.Module.load_state_dict`` copies a tensor into a parameter of the same shape whatever its dtype and values: an
integer or boolean tensor where the model has a float is cast without a word (a foreign file, not weights of this
model), and NaN or infinite weights load as they are (every output computed from them is meaningless; attention on
the CPU turns NaN rows into zeros, so the logits may even look finite). A loader that either loads correctly or
refuses checks both first (:func:`check_loadable_weights`): ``from_pretrained``, ``load_pretrained_into`` and a
training run read as a source. Between the native floating dtypes (float16, bfloat16, float32, float64) loading
casts, as every library does.

A model another library built and filled (timm, transformers) is checked after the fact against the files it was
read from (:func:`check_loaded_as_saved`): a library may fill what a file lacks with its initialisation, drop a
classifier whose size a config names differently, shift its rows (timm's ``label_offset``), take one of two copies
of a weight, or apply an adapter; every one of those leaves a model that differs from the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch

from .messages import shown_name

__all__ = ["CASTABLE_FLOATS", "check_finite_tensors", "check_loadable_weights", "check_loaded_as_saved",
           "first_nonfinite", "foreign_dtypes"]

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


def _storage(tensor: torch.Tensor) -> tuple:
    """What makes two state-dict entries one tensor (tied weights): the same memory, shape and strides."""
    return tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.stride()


def check_loaded_as_saved(loaded: Mapping[str, torch.Tensor], saved: Iterable[tuple[str, torch.Tensor]],
                          source: str, *, prefix: str = "", may_skip: Callable[[str], bool] = lambda name: False,
                          ) -> None:
    """One-line ``ValueError`` naming ``source`` unless the state dict ``loaded`` (a model a library read) holds
    exactly the tensors ``saved`` (its files' ``(name, tensor)``, read one at a time):

    * every saved tensor has an entry of the same name (``prefix`` — a base model's, ``"model."`` — ignored on both
      sides) and shape, a dtype it loads into (:func:`foreign_dtypes`), finite values, and equal values once cast to
      the entry's dtype;
    * every entry is saved, or is another entry's tensor (tied weights: the same memory), or ``may_skip(name)``
      (what the library itself computes rather than loads, e.g. a buffer it does not save).

    A saved tensor with no entry is refused unless ``may_skip(name)``. Nothing is modified.
    """
    def bare(name: str) -> str:
        return name[len(prefix):] if prefix and name.startswith(prefix) else name

    entries = {bare(name): (name, tensor) for name, tensor in loaded.items()}
    compared: set[str] = set()
    for name, tensor in saved:
        key = bare(name)
        if key not in entries:
            if may_skip(name):
                continue
            raise ValueError(f"{source}: holds tensor {shown_name(name)}, which the loaded model has no place for "
                             "(the library ignored it); not the model of this folder")
        model_name, held = entries[key]
        if tuple(tensor.shape) != tuple(held.shape):
            raise ValueError(f"{source}: tensor {shown_name(name)} has shape {tuple(tensor.shape)}, the loaded model "
                             f"{tuple(held.shape)} (the library reshaped or replaced it)")
        check_loadable_weights({name: tensor}, {name: held}, source)
        if not torch.equal(tensor.to(device=held.device, dtype=held.dtype), held):
            raise ValueError(f"{source}: the loaded model's {shown_name(model_name)} differs from the file's tensor "
                             f"{shown_name(name)} (the library changed it while loading: a config that disagrees "
                             "with the weights, a second copy, an adapter); refused rather than analyse another "
                             "model")
        compared.add(key)
    tied = {_storage(entries[key][1]) for key in compared}
    missing = [name for key, (name, tensor) in entries.items()
               if key not in compared and _storage(tensor) not in tied and not may_skip(name)]
    if missing:
        more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
        raise ValueError(f"{source}: the loaded model has {', '.join(shown_name(n) for n in missing[:3])}{more}, "
                         "which the folder's weights do not hold (left at the library's initialisation); not the "
                         "model of this folder")
