"""Which comparisons a study may call, and at what error rate: the primary family (Holm) and the rest (BH).

A study's **primary family** is fixed in its design (``StudySpec.primary``; default: every method against the
reference at the deepest depth, tuned table): a few comparisons chosen before the runs, adjusted by Holm so that
the chance of any false verdict among them is at most 5 %. **Everything else** — every other method-against-
reference cell of both tables, every depth gain and every depth-use interaction — is one exploratory family
adjusted by Benjamini–Hochberg (at most 5 % of its "better" / "worse" verdicts expected false, for independent or
positively dependent tests: Benjamini & Yekutieli 2001). Each distinct
comparison counts once: a shared-table row that repeats the tuned row's runs (issue 60) is named as such and takes
that row's verdict. Raw p-values are the
two-sided t-tests of the intervals shown (:func:`layerscale.stats.intervals.p_value`); the intervals themselves are
not adjusted, so an interval can exclude 0 while the adjusted verdict says "within noise".
"""

from __future__ import annotations

from dataclasses import replace

from .contrasts import INTERACTION, Contrast
from ...stats.intervals import Interval, p_value
from ...stats.multiplicity import adjust

__all__ = ["ALPHA", "PRIMARY", "EXPLORATORY", "assign_families", "verdict", "primary_key"]

ALPHA = 0.05
PRIMARY, EXPLORATORY = "primary", "exploratory"


def primary_key(entry: str) -> tuple[str, str, int | None, int]:
    """``(kind, method, depth_from, depth)`` of a ``--primary`` entry: ``m@d`` is the cell comparison ``diff``,
    ``m@a:b`` the interaction."""
    method, _, depths = entry.partition("@")
    parts = [int(p) for p in depths.split(":")]
    return ("diff", method, None, parts[0]) if len(parts) == 1 else (INTERACTION, method, parts[0], parts[1])


def verdict(diff: Interval | None, higher_is_better: bool, p_adj: float | None = None) -> str:
    """``better`` / ``worse`` when the difference is beyond noise — by its adjusted p-value when it has one (below
    :data:`ALPHA`), else by its interval excluding 0 — ``within noise`` otherwise; ``n < 3`` without an interval
    (fewer than 3 seeds); ``no spread`` when every seed gave the same difference (a zero-width interval says
    nothing about the noise); ``""`` without a value."""
    if diff is None:
        return ""
    if diff.low is None:
        return "n < 3"
    if not diff.std:
        return "no spread"
    beyond = p_adj < ALPHA if p_adj is not None else diff.excludes(0.0)
    if not beyond:
        return "within noise"
    return "better" if (diff.mean > 0) == higher_is_better else "worse"


def _twins(spec, cells: list) -> dict[int, object]:
    """``{id(row): twin}`` for every shared-table cell whose comparison uses exactly the runs of the tuned table's
    cell (the method and the reference at the same rates in both tables): the same comparison, to count once."""
    rates = {(c.table, c.method, c.depth): c.lr for c in cells}
    tuned = {(c.method, c.depth): c for c in cells if c.table == "tuned"}
    twins = {}
    for c in cells:
        twin = tuned.get((c.method, c.depth))
        if c.table == "tuned" or twin is None or c.method == spec.reference_method or c.lr is None:
            continue
        reference = spec.reference_method
        if c.lr == twin.lr and rates.get((c.table, reference, c.depth)) == rates.get(("tuned", reference, c.depth)):
            twins[id(c)] = twin
    return twins


def assign_families(spec, cells: list, contrasts: list[Contrast]) -> tuple[list, list[Contrast]]:
    """``cells`` and ``contrasts`` with ``family``, ``p_raw`` and ``p_adj`` set (Holm within the primary family,
    BH within the rest), each distinct comparison counted once: a shared-table row whose runs are the tuned row's
    (both methods chose the shared rate) is in no family of its own; it takes its twin's p-values (so its verdict)
    and says so (``same_runs_as``), instead of entering the adjustment a second time. The reference's own cells carry no
    comparison."""
    primary = {primary_key(e) for e in spec.primary}
    twins = _twins(spec, cells)
    items: list[tuple[str, object]] = []  # (family, item), distinct comparisons only
    for c in cells:
        if c.method == spec.reference_method or id(c) in twins:
            continue
        key = ("diff", c.method, None, c.depth)
        items.append((PRIMARY if c.table == "tuned" and key in primary else EXPLORATORY, c))
    for k in contrasts:
        key = (k.kind, k.method, k.depth_from, k.depth)
        items.append((PRIMARY if k.table == "tuned" and key in primary else EXPLORATORY, k))
    raw = {id(item): p_value(item.diff) for _, item in items}
    adjusted = {}
    for family, method in ((PRIMARY, "holm"), (EXPLORATORY, "bh")):
        members = [item for fam, item in items if fam == family]
        for item, p in zip(members, adjust([raw[id(i)] for i in members], method)):
            adjusted[id(item)] = (family, p)

    def update(item):
        if id(item) in twins:  # not a comparison of its own: in no family, with its twin's p-values and verdict
            twin = twins[id(item)]
            _, p = adjusted.get(id(twin), ("", None))
            return replace(item, family="", p_raw=raw.get(id(twin)), p_adj=p, same_runs_as=twin.table)
        if id(item) not in adjusted:
            return item
        family, p = adjusted[id(item)]
        return replace(item, family=family, p_raw=raw[id(item)], p_adj=p)
    return [update(c) for c in cells], [update(k) for k in contrasts]
