"""A checkpoint's training state checked against the run that resumes it, before that run touches any file.

:func:`~layerscale.train.state.train_state.check_train_state` checks each field's type and range on its own; this module
checks that the fields fit *this* run — its model, optimizer and scheduler — and one another, so that a crafted or
foreign ``train_state.pt`` is one ``ValueError`` naming the field, its value and what was expected, raised while
``metrics.jsonl`` and the checkpoints are still as they were (instead of an INTERNAL ASSERT and a segfault in the
fused AdamW kernel at the first step, after the metrics were cut back):

- ``optimizer.param_groups``: as many groups as this run's optimizer, each listing this run's parameter names in its
  order (the order maps saved moments to parameters); hyper-parameters of the right kind (``lr``, ``initial_lr``,
  ``weight_decay``, ``eps``: finite numbers >= 0; ``betas``: two numbers in [0, 1); ``fused`` / ``foreach``: a bool
  or null) and the algorithm's switches (``amsgrad``, ``maximize``, ``capturable``, ``differentiable``,
  ``decoupled_weight_decay``) as this run's optimizer has them; no key this optimizer does not know;
- ``optimizer.state``: keyed by this run's trainable parameter names; each entry exactly ``step`` (a 0-dim float
  tensor holding a whole number in ``[0, step]``), ``exp_avg`` and ``exp_avg_sq`` (``max_exp_avg_sq`` with
  ``amsgrad``): dense floating-point tensors of the parameter's shape, finite, the second moments >= 0,
  contiguous; and no two of these tensors (of any parameters) share memory: ``torch.save`` keeps strides and shared
  storages, so a crafted file can make a moment one float seen many times (stride 0: a segfault of the fused AdamW
  kernel at the first step) or make two moments, or two parameters' step counts, one tensor (silently wrong
  updates);
- ``scheduler``: only the keys this run's scheduler has, each of the same kind, ``last_epoch`` equal to ``step``
  (the schedule steps once per optimizer step, skipped steps included);
- ``world_size``: the number of ``rng`` entries (one per process); ``total_steps``: >= 1 and >= ``step``;
- ``model_args``: the arguments this run builds its model with (a checkpoint's model resumes as it was built).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from ...messages import shown_value
from .train_state import is_finite_number

__all__ = ["check_state_fits"]

_FLOATS = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
_NUMBER_KEYS = ("lr", "initial_lr", "weight_decay", "eps")
_SWITCHES = ("amsgrad", "maximize", "capturable", "differentiable", "decoupled_weight_decay")
_OPTIONAL_SWITCHES = ("fused", "foreach")


def _refuse(where: str, field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"{where}: training-state field {field} is {shown_value(value)}; expected {expected}")


def _same(saved: Any, expected: Any) -> bool:
    """``saved == expected`` for plain data; ``False`` where the comparison is not a plain bool (a tensor among the
    saved values compares element-wise) or fails."""
    try:
        result = saved == expected
    except Exception:  # noqa: BLE001 — a crafted value's comparison may raise anything; it is then not the same
        return False
    return result if isinstance(result, bool) else False


def _tensor_text(value: torch.Tensor) -> str:
    kind = "" if value.layout == torch.strided else f"{str(value.layout).removeprefix('torch.')} "
    return f"a {kind}{'meta ' if value.is_meta else ''}{value.dtype} tensor of shape {tuple(value.shape)}"


def _moment(where: str, field: str, value: Any, shape: torch.Size, non_negative: bool) -> None:
    expected = f"a finite{' non-negative' if non_negative else ''} float tensor of shape {tuple(shape)}"
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided or value.is_meta \
            or value.dtype not in _FLOATS or value.shape != shape:
        shown = _tensor_text(value) if isinstance(value, torch.Tensor) else shown_value(value)
        raise ValueError(f"{where}: training-state field {field} is {shown}; expected {expected}")
    if not value.is_contiguous():
        raise ValueError(f"{where}: training-state field {field} is {_tensor_text(value)} and strides "
                         f"{value.stride()}; expected a contiguous tensor, one storage of its own")
    if not bool(torch.isfinite(value).all()) or (non_negative and bool((value < 0).any())):
        raise ValueError(f"{where}: training-state field {field} holds "
                         f"{'non-finite' if not bool(torch.isfinite(value).all()) else 'negative'} values; "
                         f"expected {expected}")


def _check_no_shared_memory(where: str, tensors: list[tuple[str, torch.Tensor]]) -> None:
    """``ValueError`` naming the first of ``(field, tensor)`` (each contiguous, checked before) whose bytes overlap
    another's."""
    spans = []
    for field, tensor in tensors:
        if tensor.numel():
            start = tensor.storage_offset() * tensor.element_size()
            spans.append((tensor.untyped_storage().data_ptr(), start, start + tensor.numel() * tensor.element_size(),
                          field))
    spans.sort()
    for (storage, _, end, first), (other, start, _, second) in zip(spans, spans[1:]):
        if storage == other and start < end:
            raise ValueError(f"{where}: training-state field {second} shares memory with {first}; expected a tensor "
                             "of its own")


def _check_param_state(where: str, name: str, entry: Any, shape: torch.Size, amsgrad: bool, step: int) -> None:
    field = f"optimizer.state[{shown_value(name)}]"
    keys = {"step", "exp_avg", "exp_avg_sq", *(["max_exp_avg_sq"] if amsgrad else [])}
    if not isinstance(entry, Mapping) or set(entry) != keys:
        shown = sorted(map(str, entry)) if isinstance(entry, Mapping) else entry
        raise _refuse(where, field, shown, f"an AdamW parameter state with keys {sorted(keys)}")
    count = entry["step"]
    if not isinstance(count, torch.Tensor) or count.dim() != 0 or count.dtype not in _FLOATS \
            or count.layout != torch.strided or count.is_meta or not math.isfinite(float(count)) \
            or float(count) != int(float(count)) or not 0 <= float(count) <= step:
        raise _refuse(where, f"{field}.step", count, f"a 0-dim float tensor holding a whole number in [0, {step}] "
                                                     f"(the optimizer steps done)")
    for key in sorted(keys - {"step"}):
        _moment(where, f"{field}.{key}", entry[key], shape, non_negative=key != "exp_avg")


def _check_group(where: str, index: int, saved: Any, current: Mapping[str, Any]) -> None:
    field = f"optimizer.param_groups[{index}]"
    names = list(current.get("param_names", []))
    unknown = sorted(str(k) for k in saved if k not in current)
    if unknown:
        raise _refuse(where, f"{field} key", unknown[0], f"one of this optimizer's keys {sorted(current)}")
    for key in ("params", "param_names"):
        if key in saved and (not isinstance(saved[key], list) or not _same(saved[key], names)):
            raise _refuse(where, f"{field}.{key}", saved[key], f"this run's {len(names)} parameter names of group "
                                                               f"{index}, in order ({shown_value(names)})")
    if "params" not in saved:
        raise _refuse(where, field, sorted(saved), "a parameter group with params")
    for key in _NUMBER_KEYS:
        if key in saved and (not is_finite_number(saved[key]) or saved[key] < 0):
            raise _refuse(where, f"{field}.{key}", saved[key], "a finite number >= 0")
    if "betas" in saved:
        betas = saved["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2 or not all(is_finite_number(b) and 0 <= b < 1 for b in betas):
            raise _refuse(where, f"{field}.betas", betas, "two numbers in [0, 1)")
    for key in _SWITCHES:
        if key in saved and (saved[key] is not current[key] if isinstance(current[key], bool) else
                             not _same(saved[key], current[key])):
            raise _refuse(where, f"{field}.{key}", saved[key], f"{current[key]!r}, as this run's optimizer")
    for key in _OPTIONAL_SWITCHES:
        if key in saved and saved[key] is not None and not isinstance(saved[key], bool):
            raise _refuse(where, f"{field}.{key}", saved[key], "a bool or null")


def _check_optimizer(where: str, saved: Mapping[str, Any], optimizer: torch.optim.Optimizer,
                     shapes: Mapping[str, torch.Size], step: int) -> None:
    groups = optimizer.param_groups
    if len(saved["param_groups"]) != len(groups):
        raise ValueError(f"{where}: training-state field optimizer.param_groups holds {len(saved['param_groups'])} "
                         f"groups; expected {len(groups)}, as this run's optimizer")
    for index, (group, current) in enumerate(zip(saved["param_groups"], groups, strict=True)):
        _check_group(where, index, group, current)
    trainable = {name: bool(group.get("amsgrad", False)) for group in groups for name in group.get("param_names", [])}
    for name, entry in saved["state"].items():
        if name not in trainable:
            raise _refuse(where, "optimizer.state key", name, "the name of one of this run's trainable parameters")
        _check_param_state(where, name, entry, shapes[name], trainable[name], step)
    _check_no_shared_memory(where, [(f"optimizer.state[{shown_value(name)}].{key}", tensor)
                                    for name, entry in saved["state"].items() for key, tensor in entry.items()])


def _check_scheduler(where: str, saved: Mapping[str, Any], current: Mapping[str, Any], step: int) -> None:
    for key, value in saved.items():
        if key not in current:
            raise _refuse(where, "scheduler key", key, f"one of this scheduler's keys {sorted(current)}")
        now, field = current[key], f"scheduler.{key}"
        if isinstance(now, bool):
            ok, expected = isinstance(value, bool), "a bool"
        elif isinstance(now, int):
            ok, expected = isinstance(value, int) and not isinstance(value, bool) and value >= 0, "an int >= 0"
        elif isinstance(now, float):
            ok, expected = is_finite_number(value), "a finite number"
        elif isinstance(now, list):
            ok = isinstance(value, list) and len(value) == len(now) and all(is_finite_number(v) for v in value)
            expected = f"a list of {len(now)} finite numbers (one per parameter group)"
        else:
            ok, expected = value is None or type(value) is type(now), f"a {type(now).__name__} or null"
        if not ok:
            raise _refuse(where, field, value, expected)
    if not _same(saved["last_epoch"], step):
        raise _refuse(where, "scheduler.last_epoch", saved["last_epoch"],
                      f"{step}, the field step (the schedule steps once per optimizer step)")


def check_state_fits(where: str, state: Mapping[str, Any], *, model: torch.nn.Module,
                     optimizer: torch.optim.Optimizer, scheduler: Any, model_args: Mapping[str, Any]) -> None:
    """Raise a one-line ``ValueError`` (prefixed ``where``) for the first field of ``state`` (already through
    :func:`~layerscale.train.state.train_state.check_train_state`) that does not fit this run's ``model`` (unwrapped),
    ``optimizer``, ``scheduler`` and ``model_args``, or the state's other fields (the rules are in the module
    docstring). Reads only; changes nothing."""
    step = state["step"]
    if "world_size" in state and state["world_size"] != len(state["rng"]):
        raise _refuse(where, "world_size", state["world_size"],
                      f"{len(state['rng'])}, the number of processes whose RNG states the field rng holds")
    if "total_steps" in state and state["total_steps"] < max(1, step):
        raise _refuse(where, "total_steps", state["total_steps"],
                      f"an int >= {max(1, step)} (at least 1 and at least the field step)")
    if "model_args" in state:
        saved = state["model_args"]
        for key in sorted(set(saved) | set(model_args)):
            if not _same(saved.get(key, "<absent>"), model_args.get(key, "<absent>")):
                raise _refuse(where, f"model_args.{key}", saved.get(key, "<absent>"),
                              f"{shown_value(model_args.get(key, '<absent>'))}, as this run builds the model "
                              f"(a model built otherwise is a new run: run.init_from)")
    shapes = {name: param.shape for name, param in model.named_parameters()}
    _check_optimizer(where, state["optimizer"], optimizer, shapes, step)
    _check_scheduler(where, state["scheduler"], scheduler.state_dict(), step)
