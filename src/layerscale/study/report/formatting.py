"""How the study prints a number with its uncertainty, in one place (tables, sentences, the demo).

- three or more values: ``86.1 [85.2, 87.0]`` — the mean and its 95 % t-interval; an end cut to the metric's range
  carries ``†`` (``99.6 [98.9, 100.0†]``: the t-interval ran past 100 %);
- fewer than three: ``86.1 (seeds: 85.9, 86.4)`` — the mean and each value, no interval;
- every value equal: ``500 (no spread, n = 3)`` — no interval can be estimated;
- no value: ``—``.
"""

from __future__ import annotations

from ..design.grid import StudySpec
from ...stats.intervals import Interval

__all__ = ["format_interval", "format_p", "wide_table", "TRUNCATION_NOTE"]

TRUNCATION_NOTE = ("† marks an interval end truncated to the metric's range (the t-interval ran past it; "
                   "truncation keeps its coverage, since the true mean lies in the range).")


def format_interval(interval: Interval | None, digits: int, signed: bool = False) -> str:
    """The value as the module docstring shows it."""
    if interval is None:
        return "—"
    sign = "+" if signed else ""
    mean = f"{interval.mean:{sign}.{digits}f}"
    if interval.low is None:
        if interval.values and len(interval.values) > 1:
            return f"{mean} (seeds: {', '.join(f'{v:{sign}.{digits}f}' for v in interval.values)})"
        return f"{mean} (n = {interval.n})"
    if interval.std == 0:
        return f"{mean} (no spread, n = {interval.n})"
    low = f"{interval.low:.{digits}f}" + ("†" if interval.truncated in ("low", "both") else "")
    high = f"{interval.high:.{digits}f}" + ("†" if interval.truncated in ("high", "both") else "")
    return f"{mean} [{low}, {high}]"


def format_p(p: float | None) -> str:
    """A p-value: three significant digits, ``< 0.0001`` below that, ``—`` when there is none."""
    if p is None or p == "":
        return "—"
    return "< 0.0001" if p < 1e-4 else f"{p:.3g}"


def wide_table(spec: StudySpec, cells, table: str, cell_text) -> list[str]:
    """A Markdown table with one row per method and one column per depth."""
    lines = ["| method | " + " | ".join(f"depth {d}" for d in spec.depths) + " |",
             "|---|" + "---:|" * len(spec.depths)]
    by_key = {(c.method, c.depth): c for c in cells if c.table == table}
    for method in spec.methods:
        row = [cell_text(by_key[(method, d)]) if (method, d) in by_key else "—" for d in spec.depths]
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    return lines
