"""Across-depth comparisons: each method's depth gain, and its interaction with the reference's.

Two depths are two models, so seeds do not pair them: every across-depth comparison is Welch's interval of the
difference of two cells (Welch–Satterthwaite degrees of freedom, :func:`layerscale.stats.intervals.welch_interval`)
— one method for every study.

- **Depth gain** of method ``m`` from depth ``a`` to a deeper ``b``: ``ȳ_m(b) − ȳ_m(a)`` over the cells' test
  values (exploratory: a deeper model is also a bigger one unless the study is a shape sweep).
- **Depth-use interaction** of ``m`` against the reference ``r``: ``[ȳ_m(b) − ȳ_r(b)] − [ȳ_m(a) − ȳ_r(a)]``, the
  method's depth gain minus the reference's. Within a depth the method and the reference are paired by seed, so
  the interaction is Welch's interval between the two depths' *paired differences* (each with its own
  per-seed standard deviation and count). "Method m turns depth into accuracy better than r" is a claim about this
  interval, not about one comparison being significant and another not (Gelman & Stern 2006, "The difference
  between 'significant' and 'not significant' is not itself statistically significant", *Am. Stat.* 60:328–331).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..design.grid import StudySpec
from ...stats.intervals import Interval, welch_interval

__all__ = ["Contrast", "depth_contrasts", "DEPTH_GAIN", "INTERACTION"]

DEPTH_GAIN, INTERACTION = "depth_gain", "interaction"


@dataclass(frozen=True)
class Contrast:
    """One across-depth comparison of ``method`` (``kind``: depth gain or interaction) from ``depth_from`` to
    ``depth`` in ``table``, with its Welch interval, and (set by :mod:`layerscale.study.report.verdicts`) its family and
    raw and adjusted p-values."""

    kind: str
    table: str
    method: str
    depth_from: int
    depth: int
    diff: Interval | None
    family: str = ""
    p_raw: float | None = None
    p_adj: float | None = None


def depth_contrasts(spec: StudySpec, cells, table: str = "tuned") -> list[Contrast]:
    """Every depth gain (every method) and every interaction (every method but the reference) for every pair of
    studied depths ``a < b``, in ``table``."""
    by_key = {(c.method, c.depth): c for c in cells if c.table == table}
    out = []
    pairs = [(a, b) for i, a in enumerate(spec.depths) for b in spec.depths[i + 1:]]
    for kind in (DEPTH_GAIN, INTERACTION):
        for method in spec.methods:
            if kind == INTERACTION and method == spec.reference_method:
                continue
            for a, b in pairs:
                low, high = by_key.get((method, a)), by_key.get((method, b))
                if low is None or high is None:
                    interval = None
                elif kind == DEPTH_GAIN:
                    interval = welch_interval(high.test, low.test)
                else:
                    interval = welch_interval(high.diff, low.diff)
                out.append(Contrast(kind, table, method, a, b, interval))
    return out
