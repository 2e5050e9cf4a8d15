"""The committed studies' primary verdicts, read from their ``results.csv`` at run time (for the demo's last
lines): what the full studies found, labelled as such, beside what two minutes of digits can show.

The studies live in the source repository under ``docs/results/<study>/``; an installed package without the
repository says so instead of printing anything else.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .formatting import format_interval, format_p
from .intervals import Interval

__all__ = ["results_root", "primary_verdict_lines"]


def results_root() -> Path | None:
    """``docs/results`` of the source checkout this package runs from (an editable install), else of the current
    folder; ``None`` when neither exists."""
    here = Path(__file__).resolve().parents[3] / "docs" / "results"
    for candidate in (here, Path.cwd() / "docs" / "results"):
        if candidate.is_dir():
            return candidate
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _row_interval(row: dict) -> Interval | None:
    mean, low, high = (_number(row.get(k)) for k in ("diff_mean", "diff_ci_low", "diff_ci_high"))
    if mean is None:
        return None
    n = int(_number(row.get("diff_n")) or 0)
    return Interval(mean, low, high, n, None if low is None else 1.0)


def _procedure_note(study_dir: Path) -> str:
    """`` (…)`` naming how a study's rates and family were chosen when it predates the current procedure."""
    import json

    try:
        design = json.loads((study_dir / "study.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(design, dict) or design.get("primary_declared", False):
        return ""
    return " (earlier procedure: rates by one seed at a quarter of the budget, family named after the runs; redo in " \
           "progress, docs/RESULTS.md)"


def primary_verdict_lines(root: Path | None = None) -> list[str]:
    """One line per primary comparison of every committed study (Holm-adjusted verdict, interval, p), or one line
    saying why there is none."""
    root = results_root() if root is None else root
    if root is None:
        return ["The committed studies are in the source repository (docs/results); not found from here."]
    lines = []
    for csv_path in sorted(root.glob("*/results.csv")):
        note = _procedure_note(csv_path.parent)
        with open(csv_path, encoding="utf-8", newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("family") == "primary"]
        if not rows:
            lines.append(f"- {csv_path.parent.name}: no primary family recorded in {csv_path} yet")
            continue
        digits = 3 if "bits" in rows[0].get("metric", "") else 1
        unit = "bits per byte" if digits == 3 else "points"
        for row in rows:
            where = (f"depth {row['depth_from']} → {row['depth']} interaction" if row["table"] == "interaction"
                     else f"depth {row['depth']}")
            interval = format_interval(_row_interval(row), digits, signed=True)
            lines.append(f"- {csv_path.parent.name}: {row['method']} vs reference at {where}: {interval} {unit}, "
                         f"Holm p {format_p(_number(row.get('p_adj')))} → {row.get('verdict') or 'no verdict'}"
                         + note)
    return lines or [f"No committed study found under {root}."]
