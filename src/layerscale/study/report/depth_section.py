"""The study's "Depth use" section: each method's depth gain (exploratory) and the depth-use interaction with the
reference, the only table a sentence about depth use may cite (:mod:`layerscale.study.report.contrasts`)."""

from __future__ import annotations

from .contrasts import DEPTH_GAIN, INTERACTION, Contrast
from .formatting import format_interval, format_p
from ..design.grid import StudySpec, format_lr
from .results import Metric
from .verdicts import PRIMARY, verdict

__all__ = ["depth_use_lines"]


def _pair(k: Contrast) -> str:
    return f"{k.depth_from} → {k.depth}"


def _table(spec: StudySpec, contrasts: list[Contrast], kind: str, metric: Metric) -> list[str]:
    rows = [k for k in contrasts if k.kind == kind]
    pairs = sorted({(k.depth_from, k.depth) for k in rows}, key=lambda p: (p[0], p[1]))
    lines = ["| method | " + " | ".join(f"{a} → {b}" for a, b in pairs) + " |", "|---|" + "---:|" * len(pairs)]
    for method in spec.methods:
        found = {(k.depth_from, k.depth): k for k in rows if k.method == method}
        if not found:
            continue
        texts = []
        for pair in pairs:
            k = found.get(pair)
            if k is None or k.diff is None:
                texts.append("—")
                continue
            mark = " (primary)" if k.family == PRIMARY else ""
            texts.append(f"{format_interval(k.diff, metric.digits, signed=True)} "
                         f"{verdict(k.diff, metric.higher_is_better, k.p_adj)}{mark}")
        lines.append(f"| {method} | " + " | ".join(texts) + " |")
    return lines


def _sentences(spec: StudySpec, contrasts: list[Contrast], metric: Metric) -> list[str]:
    out = []
    for method in spec.methods:
        rows = [k for k in contrasts if k.kind == INTERACTION and k.method == method and k.diff is not None]
        groups = {"more": [], "less": [], "noise": [], "none": []}
        for k in rows:
            kind = verdict(k.diff, metric.higher_is_better, k.p_adj)
            text = (f"{_pair(k)} ({format_interval(k.diff, metric.digits, signed=True)} "
                    f"{metric.difference_unit}, adjusted p {format_p(k.p_adj)})")
            if kind == "better":
                groups["more"].append(text)
            elif kind == "worse":
                groups["less"].append(text)
            elif kind == "within noise":
                groups["noise"].append(_pair(k))
            else:
                groups["none"].append(f"{_pair(k)} ({kind})")
        parts = []
        if groups["more"]:
            parts.append(f"gains more from depth than {spec.reference_method} from " + "; ".join(groups["more"]))
        if groups["less"]:
            parts.append(f"gains less from depth than {spec.reference_method} from " + "; ".join(groups["less"]))
        if groups["noise"]:
            parts.append(f"its depth gain is within noise of {spec.reference_method}'s from "
                         + ", ".join(groups["noise"]))
        if groups["none"]:
            parts.append("no claim from " + ", ".join(groups["none"]))
        if parts:
            out.append(f"- {method}: " + "; ".join(parts) + ".")
    return out


def depth_use_lines(spec: StudySpec, contrasts: list[Contrast], metric: Metric) -> list[str]:
    """The section's Markdown (empty with one depth)."""
    if len(spec.depths) < 2 or not contrasts:
        return []
    rate = ("its tuned learning rate" if spec.tuned else "the learning rate its design fixed" if spec.fixed
            else f"the learning rate {format_lr(spec.shared_lr)}")
    budget = (" at the same parameter budget (each depth its own width)" if spec.shapes else
              " (a deeper model is also a larger one here)")
    lines = ["## Depth use", "",
             f"Two depths are two models, so runs are not paired across depths: every interval here is Welch's 95 % "
             f"t-interval (Welch–Satterthwaite degrees of freedom). Each method at {rate}.", "",
             f"**Depth-use interaction** — (the method's gain from the shallower to the deeper depth) − "
             f"({spec.reference_method}'s gain), in {metric.difference_unit}: the interval of the difference of the "
             f"two depths' paired differences against {spec.reference_method}. A sentence about which design uses "
             "depth better cites this table only.", ""]
    lines += _table(spec, contrasts, INTERACTION, metric)
    lines += ["", "What the interaction intervals support (verdicts by adjusted p-value):", ""]
    lines += _sentences(spec, contrasts, metric) or ["- No interaction has an interval yet."]
    lines += ["", f"**Depth gain** (exploratory) — each method against itself at the shallower depth{budget}:", ""]
    lines += _table(spec, contrasts, DEPTH_GAIN, metric)
    return lines + [""]
