"""The committed studies' primary verdicts, read from their ``results.csv`` at run time (for the demo's last
lines): what the full studies found, labelled as such, beside what two minutes of digits can show.

The studies live in the source repository under ``docs/results/<study>/``; an installed package without the
repository says so instead of printing anything else. Their ``study.json`` and ``tuning.json`` are read as hostile
files (:func:`layerscale.untrusted_files.read_json_file`), and one that cannot be read counts as absent.
"""

from __future__ import annotations

from pathlib import Path

from ...untrusted_files import read_json_file
from .contrasts import INTERACTION
from ..run.csv_rows import read_rows
from .formatting import format_interval, format_p
from .results import Metric
from .results_table import read_results
from .verdicts import PRIMARY

__all__ = ["REDO_SUFFIX", "results_root", "primary_verdict_lines"]

#: a redo of the study in ``docs/results/NAME`` lives in ``docs/results/NAME-grid``; once complete it supersedes it
REDO_SUFFIX = "-grid"


def results_root() -> Path | None:
    """``docs/results`` of the source checkout this package runs from (an editable install), else of the current
    folder; ``None`` when neither exists."""
    here = Path(__file__).resolve().parents[4] / "docs" / "results"  # src/layerscale/study/report/committed.py
    for candidate in (here, Path.cwd() / "docs" / "results"):
        if candidate.is_dir():
            return candidate
    return None


def _procedure_note(study_dir: Path) -> str:
    """`` (…)`` naming how a study's rates and family were chosen when it predates the current procedure."""
    try:
        design = read_json_file(study_dir / "study.json", expected=object, finite=False)
    except (OSError, ValueError):
        return ""
    if not isinstance(design, dict) or design.get("primary_declared", False):
        return ""
    return " (earlier procedure: rates by one seed at a quarter of the budget, family named after the runs; redo in " \
           "progress, docs/RESULTS.md)"


def _exploratory_only(study_dir: Path) -> bool:
    """Whether a study's design names no primary family (``--primary none``)."""
    try:
        design = read_json_file(study_dir / "study.json", expected=object, finite=False)
    except (OSError, ValueError):
        return False
    return isinstance(design, dict) and design.get("exploratory_only") is True


def _extension_pending(study_dir: Path) -> set[tuple[str, str, float]]:
    """(method, depth, rate) of the grid extensions ``tuning.json`` records as pending (issue 60)."""
    try:
        tuning = read_json_file(study_dir / "tuning.json", expected=object, finite=False)
        return {(str(c["method"]), str(c["depth"]), float(lr)) for c in tuning.get("cells") or []
                for lr in c.get("extension_pending") or []}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()


def _complete_redo(study_dir: Path) -> Path | None:
    """The folder of ``study_dir``'s redo when it has finished every run (its ``runs.csv`` holds no pending run but
    those of a pending grid extension, whose cells keep their provisional rates), else ``None``."""
    redo = study_dir.with_name(study_dir.name + REDO_SUFFIX)
    runs = read_rows(redo / "runs.csv")
    waiting = _extension_pending(redo)

    def ended(row: dict) -> bool:
        if row["status"] != "pending":
            return True
        try:
            return (row["method"], row["depth"], float(row["lr"])) in waiting
        except (KeyError, TypeError, ValueError):
            return False
    return redo if (redo / "study.json").is_file() and runs and all(ended(r) for r in runs) else None


def primary_verdict_lines(root: Path | None = None) -> list[str]:
    """One line per primary comparison of every committed study (a folder of ``layerscale study`` with its
    ``study.json``; Holm-adjusted verdict, interval, p), or one line saying why there is none. A comparison whose
    runs have not finished (a partial study: no difference yet) says so and points to the study's status; a study
    whose redo (``NAME-grid``) is complete is named as superseded by it, its verdicts left out."""
    root = results_root() if root is None else root
    if root is None:
        return ["The committed studies' verdicts, with their intervals: "
                "https://github.com/torch-layerscale/torch-layerscale/blob/main/docs/RESULTS.md (docs/results is "
                "not part of an installed package)."]
    lines = []
    for csv_path in sorted(p.parent / "results.csv" for p in root.glob("*/study.json")):
        if not csv_path.is_file():
            lines.append(f"- {csv_path.parent.name}: no results.csv yet")
            continue
        redo = _complete_redo(csv_path.parent)
        if redo is not None:
            lines.append(f"- {csv_path.parent.name}: superseded by its redo, {redo.name} (docs/RESULTS.md, \"What "
                         "changed\", sets the two side by side)")
            continue
        note = _procedure_note(csv_path.parent)
        rows = [r for r in read_results(csv_path) if r.family == PRIMARY]
        if not rows and _exploratory_only(csv_path.parent):
            lines.append(f"- {csv_path.parent.name}: exploratory only (its design names no primary family)")
            continue
        if not rows:
            lines.append(f"- {csv_path.parent.name}: no primary family recorded in {csv_path} yet")
            continue
        metric = Metric.for_language_model(not rows[0]["metric"].startswith("test accuracy"))
        for row in rows:
            where = (f"depth {row.depth_from} → {row.depth} interaction" if row.table == INTERACTION
                     else f"depth {row.depth}")
            diff = row.interval("diff")
            if diff is None:
                lines.append(f"- {csv_path.parent.name}: {row.method} vs reference at {where}: not finished yet "
                             f"({csv_path.parent / 'results.md'} has the study's status)")
                continue
            interval = format_interval(diff, metric.digits, signed=True)
            lines.append(f"- {csv_path.parent.name}: {row.method} vs reference at {where}: {interval} "
                         f"{metric.difference_unit}, Holm p {format_p(row.p())} → {row.verdict or 'no verdict'}"
                         + note)
    return lines or [f"No committed study found under {root}."]
