"""Adjusting p-values for many comparisons: Holm for a study's primary family, Benjamini–Hochberg for the rest.

A study calls dozens of verdicts at 95 %. Each one alone is wrong 5 % of the time when there is no difference, so
among 90 comparisons of equal methods about 4 or 5 would be called "better" or "worse" by chance. Two adjustments
fix what a reader may conclude:

- **Holm** (Holm 1979, "A simple sequentially rejective multiple test procedure", *Scand. J. Statist.* 6:65–70):
  with the ``m`` p-values sorted, ``p₍₁₎ ≤ … ≤ p₍ₘ₎``, the adjusted value is
  ``p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1) · p₍ⱼ₎)``; rejecting where ``p̃ < α`` keeps the probability of *any*
  false verdict in the family at most ``α`` (family-wise error), under any dependence between the tests.
- **Benjamini–Hochberg** (Benjamini & Hochberg 1995, "Controlling the false discovery rate", *J. R. Statist. Soc.
  B* 57:289–300, the step-up procedure of their §3): ``p̃₍ᵢ₎ = min_{j ≥ i} min(1, m · p₍ⱼ₎ / j)``; rejecting
  where ``p̃ < α`` keeps the expected share of false verdicts among all verdicts called at most ``α`` (false
  discovery rate; proven for independent or positively dependent tests).

Both are pure functions over lists; ``None`` entries (a comparison without a p-value: too few seeds, no spread)
are not tests: they are left ``None`` and do not count in ``m``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["holm", "benjamini_hochberg", "adjust"]


def _present(pvalues: Sequence[float | None]) -> list[int]:
    for p in pvalues:
        if p is not None and not 0.0 <= p <= 1.0:
            raise ValueError(f"a p-value must be in [0, 1], got {p}")
    return [i for i, p in enumerate(pvalues) if p is not None]


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, in the input's order (see the module docstring)."""
    index = _present(pvalues)
    order = sorted(index, key=lambda i: pvalues[i])
    m = len(order)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):  # rank j - 1
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def benjamini_hochberg(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini–Hochberg step-up adjusted p-values (q-values), in the input's order:
    ``scipy.stats.false_discovery_control(method="bh")`` over the p-values present. (Holm's procedure is not in
    SciPy, hence :func:`holm` above.)"""
    from scipy.stats import false_discovery_control

    index = _present(pvalues)
    out: list[float | None] = [None] * len(pvalues)
    if index:
        for i, p in zip(index, false_discovery_control([pvalues[i] for i in index], method="bh")):
            out[i] = float(p)
    return out


def adjust(pvalues: Sequence[float | None], method: str) -> list[float | None]:
    """``holm`` or ``bh`` by name."""
    if method == "holm":
        return holm(pvalues)
    if method == "bh":
        return benjamini_hochberg(pvalues)
    raise ValueError(f"unknown p-value adjustment {method!r}; expected 'holm' or 'bh'")


def adjust_families(rows: list[dict], is_primary) -> None:
    """Set ``row["p_adj"]`` from ``row["p_raw"]``: Holm over the rows where ``is_primary(row)`` (the design's primary
    family), Benjamini–Hochberg over the rest (exploratory)."""
    for primary, rule in ((True, holm), (False, benjamini_hochberg)):
        family = [row for row in rows if bool(is_primary(row)) == primary]
        for row, p_adj in zip(family, rule([row["p_raw"] for row in family])):
            row["p_adj"] = p_adj
