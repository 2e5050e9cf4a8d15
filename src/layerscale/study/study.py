"""``run_study``: the grid, then the tables and the report, as one call."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .executor import run_grid
from .grid import StudySpec
from .results import RunResult, collect_run, group_results, markdown_table, write_tables

__all__ = ["run_study", "StudySummary"]


@dataclass(frozen=True)
class StudySummary:
    study_dir: Path
    results: list[RunResult]
    table_markdown: str
    paths: dict[str, Path]


def run_study(spec: StudySpec, study_dir: str | os.PathLike, *, jobs: int | None = None,
              threads: int | None = None, report: bool = True, progress: bool = True) -> StudySummary:
    """Run (or continue) the study in ``study_dir``; write ``results.md``, ``results.csv``, ``runs.csv`` and, with
    ``report`` and matplotlib installed, ``report.html`` with an accuracy-against-depth figure."""
    study_dir = Path(study_dir)
    runs = run_grid(spec, study_dir, jobs=jobs, threads=threads, progress=progress)
    results = [collect_run(r, Path(r.config["run"]["out_dir"])) for r in runs]
    paths = write_tables(study_dir, results)
    if report:
        from .report import write_study_report

        paths["report"] = write_study_report(study_dir, runs, results)
    return StudySummary(study_dir, results, markdown_table(group_results(results)), paths)
