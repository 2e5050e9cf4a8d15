"""Reading a study's ``results.csv`` back: one :class:`ResultRow` per row, its intervals as
:class:`~layerscale.stats.intervals.Interval` so that they print exactly as the study printed them
(:func:`layerscale.study.report.formatting.format_interval`).

``results.csv`` (:func:`layerscale.study.report.results.results_rows`) holds one row per cell of each table (``table``:
``tuned`` or ``shared``) and one per across-depth contrast (``depth_gain`` or ``interaction``, from ``depth_from``
to ``depth``), each with its interval columns (``<name>_mean``, ``_ci_low``, ``_ci_high``, ``_n``, and for the
test metric and the difference ``_truncated`` and ``_per_seed``), its ``family`` (``primary`` or
``exploratory``), raw and adjusted p-values and the ``verdict`` by the adjusted p-value. The standard deviation is
not stored; it only decides whether an interval of zero width prints as "no spread", which equal ends say as well.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from ...stats.intervals import Interval

__all__ = ["ResultRow", "read_results", "row_interval"]


@dataclass(frozen=True)
class ResultRow:
    """One row of ``results.csv``: ``fields`` as written (strings), with typed accessors."""

    fields: dict[str, str]

    def __getitem__(self, key: str) -> str:
        return self.fields.get(key, "")

    @property
    def table(self) -> str:
        return self["table"]

    @property
    def method(self) -> str:
        return self["method"]

    @property
    def depth(self) -> int:
        return int(self["depth"])

    @property
    def depth_from(self) -> int | None:
        return int(self["depth_from"]) if self["depth_from"] else None

    @property
    def lr(self) -> float | None:
        return float(self["lr"]) if self["lr"] else None

    @property
    def family(self) -> str:
        return self["family"]

    @property
    def verdict(self) -> str:
        return self["verdict"]

    def p(self, which: str = "p_adj") -> float | None:
        return float(self[which]) if self[which] else None

    @property
    def comparison(self) -> str:
        """The row as the primary family declares it: ``method@depth``, or ``method@from:to`` for an across-depth
        comparison (the form :mod:`layerscale.study.report.verdicts` parses)."""
        return f"{self.method}@{self.depth_from}:{self.depth}" if self.depth_from else f"{self.method}@{self.depth}"

    def test_by_seed(self) -> dict[int, float]:
        """``{seed: test value}`` from ``test_per_seed`` (``5:86.1;6:85.9``); empty when the row has none."""
        out = {}
        for item in self["test_per_seed"].split(";"):
            if item:
                seed, _, value = item.partition(":")
                out[int(seed)] = float(value)
        return out

    def interval(self, name: str) -> Interval | None:
        """The row's ``name`` interval (``test``, ``diff``, ``val_best``, ``steps_to_target``), or ``None``."""
        return row_interval(self.fields, name)


def _per_seed(text: str) -> tuple[float, ...]:
    """``0:86.1;1:85.9`` (test) or ``0.2;-0.1`` (difference) → the values."""
    return tuple(float(item.rpartition(":")[2]) for item in text.split(";") if item)


def row_interval(fields: dict[str, str], name: str) -> Interval | None:
    """``name``'s interval of a ``results.csv`` row (its mean, ends, count, truncated end and per-seed values), or
    ``None`` when the row has no mean for it."""
    mean = fields.get(f"{name}_mean", "")
    if mean == "":
        return None
    low, high = fields.get(f"{name}_ci_low", ""), fields.get(f"{name}_ci_high", "")
    low_f, high_f = (float(low), float(high)) if low != "" and high != "" else (None, None)
    spread = None if low_f is None else (0.0 if low_f == high_f else 1.0)
    return Interval(float(mean), low_f, high_f, int(fields.get(f"{name}_n") or 0), spread,
                    values=_per_seed(fields.get(f"{name}_per_seed", "")),
                    truncated=fields.get(f"{name}_truncated", ""))


def read_results(path: str | os.PathLike) -> list[ResultRow]:
    """The rows of a study's ``results.csv``; ``ValueError`` naming the file when it is missing or has no
    ``table`` column."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise ValueError(f"{path} not found (a study writes it: layerscale study --report-only --out "
                         f"{path.parent})") from None
    if rows and "table" not in rows[0]:
        raise ValueError(f"{path}: not a study's results.csv (no 'table' column)")
    return [ResultRow(r) for r in rows]
