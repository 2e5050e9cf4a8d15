"""Warnings raised from diagnostics records: a branch ratio that explodes, a scale that collapses toward zero.

Three conditions, each checked per block and branch on every record (thresholds in :class:`AlertThresholds`):

* ``ratio_explosion``: ``r = ‖s‖/‖x‖ > ratio_max`` or ``r`` is not finite — the branch overwhelms the stream;
* ``ratio_growth``: ``r_t / r_prev > ratio_growth`` between two consecutive records of the same branch while
  ``r_t ≥ ratio_growth_min`` (a LayerScale branch starting at ε = 1e-6 legitimately grows by decades while it is
  still negligible; that is the method working, not an explosion);
* ``scale_collapse``: ``mean|γ| < scale_collapse · mean|γ₀|`` — the scale shrinks toward zero and switches the
  branch off; ``γ₀`` is its value when monitoring started (the initial or loaded γ: a run from saved weights
  compares against the γ it started from, not the layer's configured init). Skipped when ``mean|γ₀|`` is 0 (a block
  inserted by ``layerscale grow``, ReZero's α): nothing to fall from.

Each event's ``value`` and ``threshold`` are in the same unit: the ratio and ``ratio_max`` for an explosion, the
growth factor ``r_t / r_prev`` and ``ratio_growth`` for a growth, ``mean|γ|`` and ``scale_collapse · mean|γ₀|``
for a collapse. An alert is reported once when its condition becomes true and again only after the condition has
cleared, so a run that stays in a bad state does not flood the log (:meth:`AlertTracker.state_dict` carries this
across a resume). Each alert is a Python ``logging`` warning on the ``layerscale.diagnostics`` logger and a JSONL
event ``{"split": "diagnostics_warning", ...}``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..messages import shown_value

__all__ = ["ALERT_KINDS", "AlertThresholds", "AlertTracker", "LOGGER_NAME", "WARNING_SPLIT"]

LOGGER_NAME = "layerscale.diagnostics"
#: The ``split`` of a warning event in ``metrics.jsonl``.
WARNING_SPLIT = "diagnostics_warning"
#: The kinds of alert (module docstring).
ALERT_KINDS = ("ratio_explosion", "ratio_growth", "scale_collapse")
_log = logging.getLogger(LOGGER_NAME)


@dataclass(frozen=True)
class AlertThresholds:
    """``ratio_max``: largest acceptable branch-to-stream ratio; ``ratio_growth``: largest acceptable factor
    between two consecutive records, checked only once the ratio is at least ``ratio_growth_min``;
    ``scale_collapse``: smallest acceptable ``mean|γ| / mean|γ₀|``. A threshold of ``0`` switches its check
    off."""

    ratio_max: float = 10.0
    ratio_growth: float = 10.0
    ratio_growth_min: float = 0.1
    scale_collapse: float = 0.1

    def __post_init__(self) -> None:
        for name in ("ratio_max", "ratio_growth", "ratio_growth_min", "scale_collapse"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise ValueError(f"diagnostics threshold {name} must be a number >= 0, got {value!r}")

    @classmethod
    def of(cls, given: AlertThresholds | Mapping[str, float] | None) -> AlertThresholds:
        """``given`` as thresholds: the defaults for ``None``, a mapping of field names to values (``{"ratio_max":
        5}``, the others at their defaults), or the object itself; anything else, or an unknown field, is a
        one-line ``ValueError`` (a mapping was accepted and failed at the first recorded step)."""
        if given is None:
            return cls()
        if isinstance(given, cls):
            return given
        if isinstance(given, Mapping):
            names = [f.name for f in fields(cls)]
            unknown = [key for key in given if key not in names]
            if unknown:
                raise ValueError(f"diagnostics thresholds: unknown field(s) {', '.join(map(repr, unknown))}; "
                                 f"expected {', '.join(names)}")
            return cls(**given)
        raise ValueError(f"thresholds must be an AlertThresholds, a mapping of its fields or None, got "
                         f"{type(given).__name__}")


class AlertTracker:
    """Checks successive records against :class:`AlertThresholds` and remembers which alerts are active.

    ``scale_init`` maps ``(block name, branch)`` to the reference ``mean|γ₀|``, the branch's value when monitoring
    started (the initial or loaded γ); the name is kept for the checkpointed state.
    """

    def __init__(self, thresholds: AlertThresholds, scale_init: dict[tuple[str, str], float]) -> None:
        self.thresholds = thresholds
        self.scale_init = dict(scale_init)
        self._previous_ratio: dict[tuple[str, str], float] = {}
        self._active: set[tuple[str, str, str]] = set()

    def state_dict(self) -> dict:
        """What the next :meth:`check` depends on, as plain lists (saved in training checkpoints, so a resumed run
        raises exactly the warnings of an uninterrupted one): the previous ratio per branch, the active alerts and
        the reference ``mean|γ₀|`` per branch."""
        return {"previous_ratio": [[block, branch, ratio] for (block, branch), ratio in self._previous_ratio.items()],
                "active": sorted([list(key) for key in self._active]),
                "scale_init": [[block, branch, value] for (block, branch), value in self.scale_init.items()]}

    @staticmethod
    def parse_state(state: Any) -> tuple[dict, set, dict]:
        """``(previous_ratio, active, scale_init)`` of :meth:`state_dict`'s output, or a one-line ``ValueError``
        naming the first entry that is not ``[block name, branch, number]`` (a ratio may be non-finite: an
        exploded branch's; a reference ``mean|γ₀|`` is finite and >= 0) or ``[block name, branch, kind]`` with a
        kind of :data:`ALERT_KINDS`."""
        if not isinstance(state, dict) or set(state) != {"previous_ratio", "active", "scale_init"}:
            raise ValueError(f"alerts is {shown_value(state)}; expected a diagnostics alert state, a mapping of "
                             f"previous_ratio, active and scale_init")

        def entries(field: str, last_ok, expected: str) -> list[tuple]:
            items = state[field]
            if not isinstance(items, list):
                raise ValueError(f"alerts.{field} is {shown_value(items)}; expected a list of {expected}")
            for i, item in enumerate(items):
                if not (isinstance(item, (list, tuple)) and len(item) == 3 and isinstance(item[0], str)
                        and isinstance(item[1], str) and last_ok(item[2])):
                    raise ValueError(f"alerts.{field}[{i}] is {shown_value(item)}; expected {expected}")
            return [tuple(item) for item in items]

        def number(value: Any) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool)

        previous = {(b, br): float(r) for b, br, r in entries("previous_ratio", number, "[block, branch, ratio]")}
        active = set(entries("active", lambda k: k in ALERT_KINDS, f"[block, branch, one of {list(ALERT_KINDS)}]"))
        scale_init = {(b, br): float(v) for b, br, v in entries(
            "scale_init", lambda v: number(v) and math.isfinite(v) and v >= 0, "[block, branch, finite number >= 0]")}
        return previous, active, scale_init

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s output (``ValueError``, from :meth:`parse_state`, for anything else)."""
        self._previous_ratio, self._active, self.scale_init = self.parse_state(state)

    def check(self, record: dict) -> list[dict]:
        """The new alert events for ``record`` (a ``diagnostics`` record), each also logged as a warning."""
        events = []
        for block in record["blocks"]:
            for branch in ("attn", "mlp"):
                stats = block.get(branch)
                if stats is None:
                    continue
                for kind, value, threshold, message in self._conditions(block["name"], branch, stats):
                    key = (block["name"], branch, kind)
                    if message is None:
                        self._active.discard(key)
                        continue
                    if key in self._active:
                        continue
                    self._active.add(key)
                    text = f"step {record['step']}: {block['name']} {branch} branch: {message}"
                    _log.warning(text)
                    events.append({"split": WARNING_SPLIT, "step": record["step"], "block": block["name"],
                                   "branch": branch, "kind": kind, "value": value, "threshold": threshold,
                                   "message": text})
        return events

    def _conditions(self, block: str, branch: str, stats: dict):
        """Yield ``(kind, value, threshold, message or None when the condition does not hold)``."""
        th = self.thresholds
        ratio = stats.get("ratio")
        if ratio is not None:
            bad = not math.isfinite(ratio) or (th.ratio_max > 0 and ratio > th.ratio_max)
            yield ("ratio_explosion", ratio, th.ratio_max,
                   f"branch-to-stream ratio {ratio:.4g} exceeds {th.ratio_max:g}" if bad else None)
            previous = self._previous_ratio.get((block, branch))
            grew = (previous is not None and previous > 0 and math.isfinite(ratio) and th.ratio_growth > 0
                    and ratio >= th.ratio_growth_min and ratio / previous > th.ratio_growth)
            growth = ratio / previous if previous is not None and previous > 0 and math.isfinite(ratio) else None
            # value and threshold in the same unit: the growth factor between two records (not the ratio itself)
            yield ("ratio_growth", growth, th.ratio_growth,
                   f"branch-to-stream ratio grew x{growth:.3g} since the last record "
                   f"({previous:.4g} -> {ratio:.4g}; limit x{th.ratio_growth:g})" if grew else None)
            self._previous_ratio[(block, branch)] = ratio
        scale = stats.get("scale_mean")
        init = self.scale_init.get((block, branch))
        if scale is not None and init and th.scale_collapse > 0:
            collapsed = scale < th.scale_collapse * init
            yield ("scale_collapse", scale, th.scale_collapse * init,
                   f"scale mean|gamma| {scale:.3g} fell below {th.scale_collapse:g} x {init:.3g}, its value when "
                   f"monitoring started"
                   if collapsed else None)
