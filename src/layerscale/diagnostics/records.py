"""Diagnostics records as JSON: non-finite numbers written as strings and read back, and flat scalars for TensorBoard.

JSON has no NaN or infinity; like the trainer's metric log, a non-finite float is written as the string
``"nan"``, ``"inf"`` or ``"-inf"`` (so an exploding run still writes valid lines) and :func:`restore_numbers` turns
those strings back into floats when the report reads the file.
"""

from __future__ import annotations

import math
from typing import Any

from ..messages import shown_value

__all__ = ["diagnostics_record_problem", "json_safe", "restore_numbers", "tensorboard_scalars", "compact_record",
           "COMPACT_DIGITS", "EXACT_FIELDS"]

_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth of dicts and lists) replaced by its ``str``."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def restore_numbers(value: Any) -> Any:
    """The inverse of :func:`json_safe`: ``"nan"``, ``"inf"``, ``"-inf"`` become floats again, at any depth."""
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {k: restore_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_numbers(v) for v in value]
    return value


#: significant digits :func:`compact_record` keeps (what the reports print: ``f"{v:.4g}"``)
COMPACT_DIGITS = 4
#: fields :func:`compact_record` keeps exactly: the γ / α heatmaps of the reports read them
EXACT_FIELDS = frozenset({"scale_mean"})


def compact_record(value: Any, digits: int = COMPACT_DIGITS, exact: frozenset[str] = EXACT_FIELDS) -> Any:
    """``value`` (a diagnostics record, or any part of one) with every float rounded to ``digits`` significant
    digits, ``float(f"{v:.{digits}g}")``, except the values of the keys in ``exact`` (at any depth), which are kept as
    they are. Keys, ints, strings, ``None`` and the order of everything are unchanged, so every reader reads the
    result as it reads the record; rounding twice gives the result of rounding once. A float written with 17
    significant digits is what makes a per-step record long and incompressible: a depth-96 record of 55 kB becomes
    about 39 kB, and about a third as large once compressed (``layerscale study --pack``)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: v if k in exact else compact_record(v, digits, exact) for k, v in value.items()}
    if isinstance(value, list):
        return [compact_record(v, digits, exact) for v in value]
    return value


# record field -> TensorBoard tag group (one chart group per statistic, one curve per block)
_BLOCK_FIELDS = {"stream_rms": "diagnostics_stream_rms", "grad_norm": "diagnostics_grad_norm",
                 "update_ratio": "diagnostics_update_ratio"}
_BRANCH_FIELDS = {"ratio": "diagnostics_ratio", "scale_mean": "diagnostics_scale_mean"}


def tensorboard_scalars(record: dict) -> dict[str, float]:
    """``{tag: value}`` for a diagnostics record: ``diagnostics_ratio_attn/blocks.3``, ``diagnostics_scale_mean_mlp/…``,
    ``diagnostics_stream_rms/…``, ``diagnostics_grad_norm/…``, ``diagnostics_update_ratio/…`` (``None`` skipped)."""
    out: dict[str, float] = {}
    for block in record["blocks"]:
        name = block["name"]
        for field, group in _BLOCK_FIELDS.items():
            if isinstance(block.get(field), (int, float)):
                out[f"{group}/{name}"] = float(block[field])
        for branch in ("attn", "mlp"):
            stats = block.get(branch) or {}
            for field, group in _BRANCH_FIELDS.items():
                if isinstance(stats.get(field), (int, float)):
                    out[f"{group}_{branch}/{name}"] = float(stats[field])
    return out


def diagnostics_record_problem(record: dict, blocks: int | None = None) -> str | None:
    """What makes ``record`` not a diagnostics record as :class:`~layerscale.diagnostics.monitor` writes it, or
    ``None``: ``blocks`` must be a non-empty list (of ``blocks`` entries, when given: one per monitored block, the
    same in every record of a run) of mappings with a string ``name`` and, per branch (``attn``, ``mlp``), a
    mapping or null. Numbers that are not numbers are shown as gaps by the report; a wrong shape cannot be."""
    entries = record.get("blocks")
    if not isinstance(entries, list) or not entries:
        return f"'blocks' is {shown_value(entries)}, expected a non-empty list of per-block objects"
    for i, block in enumerate(entries):
        if not isinstance(block, dict) or not isinstance(block.get("name"), str):
            return f"blocks[{i}] is {shown_value(block)}, expected an object with a block 'name'"
        for branch in ("attn", "mlp"):
            if not isinstance(block.get(branch), (dict, type(None))):
                return f"blocks[{i}].{branch} is {shown_value(block[branch])}, expected an object or null"
    if blocks is not None and len(entries) != blocks:
        return f"'blocks' has {len(entries)} entries, the run's first diagnostics record has {blocks}"
    return None
