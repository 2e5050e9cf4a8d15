"""The DepthBench AttnRes sweep on docs/RESULTS.md (issue 58; docs/results/depthbench/DESIGN.md, addendum of
2026-12-06 04:48 UTC): its methods set beside the redo's Hyper-Connections, not compared with them.

The design says how the page reads the sweep: "beside the redo's ``hc`` rows (same Pre-LN runs, same recipe),
whether Full AttnRes, like Hyper-Connections there, is better than Pre-LN at every depth, and whether its advantage
grows with depth (the interaction rows). ``attnres`` against ``hc`` directly is not tested". :func:`beside_hc` gives
the first part — one table of each method against the reference at its own tuned rate, the ``hc`` row read from the
redo's own table with that table's verdicts, and one sentence per method naming the depths of each verdict, generated
from the verdicts, never written by hand. The interaction rows are the sweep's ``depth-use`` block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["SWEEP_FOLDER", "SET_BESIDE", "beside_hc", "claim_sentence"]

#: the sweep's folder under docs/results
SWEEP_FOLDER = "depthbench-attnres"
#: the redo's method set beside the sweep's (the seed's abstract: Hyper-Connections and Full AttnRes)
SET_BESIDE = "hc"
#: the method the seed's claim names, and the words the page gives it
CLAIMED = "attnres"


def _depth_list(study: Any, depths: list[int]) -> str:
    """``4, 8 and 16 blocks``."""
    words = [study.at(d) for d in depths]
    unit = " blocks" if all(w.endswith(" blocks") for w in words) else ""
    names = [w[: -len(" blocks")] if unit else w for w in words]
    joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return joined + unit


def _by_verdict(study: Any, method: str, depths: list[int]) -> dict[str, list[int]]:
    """The depths of each verdict of ``method`` against the reference at its tuned rate (``—``: no row)."""
    groups: dict[str, list[int]] = {}
    for depth in depths:
        row = study.cell("tuned", method, depth)
        verdict = row.verdict if row is not None and row.interval("diff") is not None else "not compared"
        groups.setdefault(verdict, []).append(depth)
    return groups


def _method_sentence(study: Any, method: str, label: str, depths: list[int]) -> str:
    groups = _by_verdict(study, method, depths)
    order = ("better", "worse", "within noise")
    parts = [f"{'within noise of' if verdict == 'within noise' else verdict + ' than'} {study.reference} at "
             f"{_depth_list(study, found)}" for verdict in order if (found := groups.get(verdict))]
    parts += [f"{verdict} at {_depth_list(study, found)}" for verdict, found in groups.items()
              if verdict not in order]
    return f"- {label}: " + "; ".join(parts) + "."


def claim_sentence(sweep: Any, depths: list[int]) -> str:
    """Whether the sweep's table supports the seed's "Full AttnRes improves consistently even at extreme deep
    shapes" in the sense the design fixed: better than the reference at every depth (Benjamini–Hochberg)."""
    groups = _by_verdict(sweep, CLAIMED, depths)
    if set(groups) == {"better"}:
        return (f"So the table supports the seed's claim for Full AttnRes here: `{CLAIMED}` is better than "
                f"{sweep.reference} at every depth of the sweep.")
    against = []
    if groups.get("worse"):
        against.append(f"worse than {sweep.reference} at {_depth_list(sweep, groups['worse'])}")
    if groups.get("within noise"):
        against.append(f"within noise at {_depth_list(sweep, groups['within noise'])}")
    other = [v for v in groups if v not in ("better", "worse", "within noise")]
    if other:
        against.append(", ".join(f"{v} at {_depth_list(sweep, groups[v])}" for v in other))
    return (f"So the table does not support the seed's claim that Full AttnRes improves consistently at every depth: "
            f"`{CLAIMED}` is " + "; ".join(against) + ".")


def beside_hc(sweep: Any, redo: Any, cell: Callable[[Any, Any], str]) -> list[str]:
    """The sweep's methods and the redo's ``hc`` against the shared reference at each depth, each at its own tuned
    rate; ``cell(study, row)`` prints one comparison (interval, verdict, adjusted p) as the page's other tables do.
    ``ValueError`` when the two studies do not share the reference or the depths (the design reuses the redo's
    reference runs, so they must)."""
    depths = list(sweep.design["depths"])
    if sweep.reference != redo.reference or list(redo.design["depths"]) != depths:
        raise ValueError(f"the sweep ({sweep.reference}, depths {depths}) and the redo ({redo.reference}, depths "
                         f"{list(redo.design['depths'])}) do not share the reference and depths")
    methods = [m for m in sweep.design["methods"] if m != sweep.reference]
    rows = [(f"{SET_BESIDE} (the redo, `depthbench-grid`)", redo, SET_BESIDE)] + [(m, sweep, m) for m in methods]
    header = "| method | " + " | ".join(sweep.at(d) for d in depths) + " |"
    lines = [f"Difference against {sweep.reference} in {sweep.unit}, each method at its own tuned rate (paired by "
             "seed; verdict by the adjusted p shown: Benjamini–Hochberg within each study, Holm for the redo's "
             "primary comparisons, marked *). The `hc` row is the redo's own table, set beside the sweep's rows, not "
             "compared with them:", "", header, "|---|" + "---:|" * len(depths)]
    for label, study, method in rows:
        cells = [(lambda row: "—" if row is None or row.interval("diff") is None else cell(study, row))(
            study.cell("tuned", method, d)) for d in depths]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", _method_sentence(redo, SET_BESIDE, f"`{SET_BESIDE}` (the redo)", depths)]
    lines += [_method_sentence(sweep, m, f"`{m}`", depths) for m in methods]
    if CLAIMED in methods:
        lines += ["", claim_sentence(sweep, depths)]
    return lines
