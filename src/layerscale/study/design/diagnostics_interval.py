"""The diagnostics interval of a study run: record often enough to see a scale grow, whatever the run length.

The diagnostics callback records step 1 (the forward at initialisation) and every step ``s`` with
``s % every == 0`` (:mod:`layerscale.diagnostics.callback`). A run of ``T`` steps at interval ``k ≥ 2`` therefore
has ``1 + ⌊T / k⌋`` records (``T`` records at ``k = 1``). The largest ``k`` with at least ``m`` records is
``k = ⌊T / (m − 1)⌋``; a run shorter than ``m − 1`` steps records every step (``T`` records, all there are).
"""

from __future__ import annotations

__all__ = ["diagnostics_every", "diagnostics_record_count"]


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def diagnostics_record_count(total_steps: int, every: int) -> int:
    """How many diagnostics records a run of ``total_steps`` steps writes at interval ``every``: step 1 and every
    multiple of ``every`` up to ``total_steps``."""
    _check_positive("total_steps", total_steps)
    _check_positive("every", every)
    return len({1, *range(every, total_steps + 1, every)})


def diagnostics_every(total_steps: int, min_records: int = 20) -> int:
    """The largest diagnostics interval that gives a run of ``total_steps`` steps at least ``min_records``
    records: ``max(1, ⌊total_steps / (min_records − 1)⌋)`` (every step when the run is too short to have that
    many). ``min_records`` must be at least 2 (step 1 alone is always recorded)."""
    _check_positive("total_steps", total_steps)
    if isinstance(min_records, bool) or not isinstance(min_records, int) or min_records < 2:
        raise ValueError(f"min_records must be an integer >= 2, got {min_records!r}")
    return max(1, total_steps // (min_records - 1))
