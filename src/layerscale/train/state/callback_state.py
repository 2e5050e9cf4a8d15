"""Callback state in checkpoints: a callback that defines ``state_dict()`` (plain data: numbers, strings, lists,
dicts) and ``load_state_dict(state)`` has its state saved in every checkpoint and given back on resume, so a resumed
run behaves as one never interrupted (e.g. the diagnostics warnings, which fire when a condition *becomes* true).

States are keyed by class name (``DiagnosticsCallback``; a second instance of a class: ``DiagnosticsCallback#2``),
so a resumed run may pass its callbacks in another order; a callback with no saved state is left as built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["callback_states", "load_callback_states"]


def _keys(callbacks: Sequence[Any]) -> list[str]:
    seen: dict[str, int] = {}
    keys = []
    for callback in callbacks:
        name = type(callback).__name__
        seen[name] = seen.get(name, 0) + 1
        keys.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return keys


def callback_states(callbacks: Sequence[Any]) -> dict[str, Any]:
    """``{key: callback.state_dict()}`` for every callback that has a ``state_dict`` method."""
    return {key: callback.state_dict() for key, callback in zip(_keys(callbacks), callbacks, strict=True)
            if callable(getattr(callback, "state_dict", None))}


def load_callback_states(callbacks: Sequence[Any], states: dict[str, Any]) -> None:
    """Give each callback with a ``load_state_dict`` method its saved state, when the checkpoint has one. A
    callback refuses a state it cannot use with a ``ValueError`` (raised again naming the field
    ``callbacks.<key>``), at once, not at its first use: the run directory is still untouched then."""
    for key, callback in zip(_keys(callbacks), callbacks, strict=True):
        if key in states and callable(getattr(callback, "load_state_dict", None)):
            try:
                callback.load_state_dict(states[key])
            except ValueError as exc:
                raise ValueError(f"training-state field callbacks.{key}: {exc}") from None
