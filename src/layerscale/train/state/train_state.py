"""The fields of a checkpoint's ``train_state.pt``, checked before a resumed run touches any file.

A training state is read with ``weights_only=True`` (no code runs), but its fields are still data from a file that
may have been edited or crafted. Every field the trainer reads is checked here, against the types
:meth:`~layerscale.train.loop.trainer.Trainer.checkpoint` writes, so that a bad one is one ``ValueError`` naming the
field, the value and what is allowed, raised while the run directory is still untouched (instead of a traceback, a
hang, or a refusal after ``metrics.jsonl`` was already cut back):

- ``step``, ``epoch``: ints >= 0 (``bool`` is not an int); ``batch_in_epoch``: an int in
  ``[0, steps_per_epoch)`` — a position past the end of the epoch would give the sampler nothing to draw, forever;
- ``elapsed``: a finite number >= 0; ``world_size``, ``total_steps``: ints >= 1 / >= 0;
- ``model``: a str; ``model_args``, ``last_eval``, ``test_eval``, ``callbacks``: mappings with str keys (the two
  evaluation records of numbers, strings, bools and nulls);
- ``early_stopping``: a mapping of ``best`` (finite number or null), ``best_step`` / ``stopped_step`` (int >= 0 or
  null) and ``evals_without_improvement`` (int >= 0);
- ``optimizer``: ``{"state": mapping, "param_groups": list of mappings}``; ``scheduler``: a mapping with
  ``last_epoch`` (an int >= 0);
- ``rng``: a non-empty list of ``{"cpu": uint8 tensor, "cuda": uint8 tensor or null}``.

``test_eval``, ``early_stopping``, ``callbacks``, ``elapsed``, ``last_eval``, ``world_size``, ``total_steps`` and
``model_args`` may be absent (checkpoints of earlier versions); the others are required. Whether the fields fit the
run that resumes them (its model, optimizer and scheduler) is checked next, by
:mod:`layerscale.train.state.train_state_fit`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from ...messages import shown_value

__all__ = ["check_position", "check_train_state"]

_REQUIRED = ("step", "epoch", "batch_in_epoch", "optimizer", "scheduler", "rng", "model")


def _refuse(where: str, field: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"{where}: training-state field {field} is {shown_value(value)}; allowed: {allowed}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_at_least(where: str, field: str, value: Any, low: int, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not _is_int(value) or value < low:
        raise _refuse(where, field, value, f"an int >= {low}" + (" or null" if optional else ""))


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool; an int past float's range is not)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past float's range
        return False


def _mapping(where: str, field: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _refuse(where, field, value, "a mapping with str keys")
    return value


def _check_early_stopping(where: str, value: Any) -> None:
    state = _mapping(where, "early_stopping", value)
    best = state.get("best")
    if best is not None and not is_finite_number(best):
        raise _refuse(where, "early_stopping.best", best, "a finite number or null")
    for name in ("best_step", "stopped_step"):
        _int_at_least(where, f"early_stopping.{name}", state.get(name), 0, optional=True)
    _int_at_least(where, "early_stopping.evals_without_improvement", state.get("evals_without_improvement", 0), 0)


def _check_rng(where: str, value: Any) -> None:
    def byte_tensor(item: Any) -> bool:
        return isinstance(item, torch.Tensor) and item.dtype == torch.uint8 and item.dim() == 1

    allowed = "a non-empty list, one {'cpu': uint8 tensor, 'cuda': uint8 tensor or null} per process"
    if not isinstance(value, list) or not value:
        raise _refuse(where, "rng", value, allowed)
    for rank, item in enumerate(value):
        if not isinstance(item, Mapping) or not byte_tensor(item.get("cpu")) or not (
                item.get("cuda") is None or byte_tensor(item["cuda"])):
            raise _refuse(where, f"rng[{rank}]", item, allowed)


def _check_optimizer(where: str, value: Any) -> None:
    allowed = "an optimizer state dict {'state': mapping, 'param_groups': list of mappings}"
    if not isinstance(value, Mapping) or not isinstance(value.get("state"), Mapping) \
            or not isinstance(value.get("param_groups"), list) \
            or not all(isinstance(g, Mapping) for g in value["param_groups"]):
        raise _refuse(where, "optimizer", value, allowed)


def check_train_state(where: str, state: Mapping[str, Any]) -> None:
    """Raise a one-line ``ValueError`` (prefixed ``where``) for the first field of ``state`` that is missing or not
    what :meth:`~layerscale.train.loop.trainer.Trainer.checkpoint` writes (the list is in the module docstring)."""
    missing = [name for name in _REQUIRED if name not in state]
    if missing:
        raise ValueError(f"{where}: training state without field(s) {', '.join(missing)} (not a complete "
                         "training state written by layerscale train)")
    for name in ("step", "epoch", "batch_in_epoch"):
        _int_at_least(where, name, state[name], 0)
    if "total_steps" in state:
        _int_at_least(where, "total_steps", state["total_steps"], 0)
    if "world_size" in state:
        _int_at_least(where, "world_size", state["world_size"], 1)
    elapsed = state.get("elapsed", 0.0)
    if not is_finite_number(elapsed) or elapsed < 0:
        raise _refuse(where, "elapsed", elapsed, "a finite number of seconds >= 0")
    if not isinstance(state["model"], str):
        raise _refuse(where, "model", state["model"], "a model name (str)")
    for name in ("model_args", "last_eval", "test_eval", "callbacks"):
        if name in state:
            _mapping(where, name, state[name])
    for name in ("last_eval", "test_eval"):  # evaluation records: they go into summary.json as they are
        for key, value in state.get(name, {}).items():
            if value is not None and not isinstance(value, (str, int, float)):
                raise _refuse(where, f"{name}.{key}", value, "a number, a string, a bool or null")
    if "early_stopping" in state:
        _check_early_stopping(where, state["early_stopping"])
    _check_optimizer(where, state["optimizer"])
    scheduler = state["scheduler"]
    if not isinstance(scheduler, Mapping) or not _is_int(scheduler.get("last_epoch")) or scheduler["last_epoch"] < 0:
        raise _refuse(where, "scheduler", scheduler, "a scheduler state dict with last_epoch (an int >= 0)")
    _check_rng(where, state["rng"])


def check_position(where: str, state: Mapping[str, Any], steps_per_epoch: int) -> None:
    """Raise a one-line ``ValueError`` when ``batch_in_epoch`` is not a position inside an epoch of
    ``steps_per_epoch`` batches (this run's batch size may differ from the one that wrote the checkpoint)."""
    position = state["batch_in_epoch"]
    if position >= steps_per_epoch:
        raise _refuse(where, "batch_in_epoch", position,
                      f"an int in [0, {steps_per_epoch}) (this run has {steps_per_epoch} batches per epoch)")
