"""``run_study``: check the design, tune each cell's learning rate, run the final seeds, then tables and report.

Order is the contract:

1. **Check everything before writing anything.** Every run's config is validated, the data is loaded once and
   every (method, depth) model is built on the meta device for it: a bad study is one ``ValueError`` and no
   study folder. The plan this finds is recorded in ``plan.json`` (:mod:`layerscale.study.design.plan`), so that tables
   and report rebuild (``train=False``) without the data.
2. **Tune** (when ``lrs`` has more than one rate): successive halving over the tuning runs
   (:mod:`layerscale.study.run.tuning`), scored on the validation split; the choice per cell goes to ``tuning.json``.
3. **Final runs**: every seed at the tuned rate and at the shared rate, to the full budget; each reads the test
   split once, when it ends.
4. **Tables and report** (stability tables included, :mod:`.report.stability_table`) from the run directories
   alone (so they can be rebuilt anywhere the folder is copied).

Interrupting at any point and rerunning the same command continues: finished runs are kept, paused and
interrupted ones resume from their checkpoints.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..atomic_io import write_json_atomic
from .run.archive import ARCHIVE_FILE, refuse_packed
from .run.executor import RunFailure, resolve_parallelism, window_open
from .run.executors import ExecutorOptions, make_pool, resolve_options
from .design.grid import SPEC_FILE, StudySpec
from .report.results import CellResult, RunResult, cell_results, collect_run, write_tables
from .report.summary import study_cost, study_markdown
from .report.verdicts import assign_families
from .report.contrasts import Contrast, depth_contrasts
from .design.plan import StudyPlan, plan_study, resolve_plan, write_plan
from .report.primary_bootstrap import with_bootstrap
from .report.stability_table import stability_rows
from .run.rate_search import TuningOutcome, tune_study
from .run.tuning import RungResult

__all__ = ["run_study", "check_study_paths", "StudySummary", "StudyPlan", "plan_study", "summarize"]

@dataclass(frozen=True)
class StudySummary:
    study_dir: Path
    results: list[RunResult]
    cells: list[CellResult]
    chosen: dict[tuple[str, int], float]
    rungs: dict[tuple[str, int], list[RungResult]]
    markdown: str
    paths: dict[str, Path]
    failures: list[RunFailure] = field(default_factory=list)
    contrasts: list[Contrast] = field(default_factory=list)
    tuning: TuningOutcome | None = None
    stability: list[dict] = field(default_factory=list)  # stability.csv's rows (report.stability_table)


def _with_enough_diagnostics(spec: StudySpec, total_steps: int) -> StudySpec:
    """``spec`` whose runs record diagnostics at least 20 times (γ growth readable in the report): the base's
    ``diagnostics.every`` when it already does, else :func:`diagnostics_every` of the run length. Only the runs'
    configs change; ``study.json`` keeps the design as given."""
    from ..train.config.schema import DiagnosticsConfig
    from .design.diagnostics_interval import diagnostics_every

    section = spec.base.get("diagnostics") or {}
    every = min(int(section.get("every", DiagnosticsConfig.every)), diagnostics_every(total_steps))
    if every == section.get("every"):
        return spec
    return replace(spec, base={**spec.base, "diagnostics": {**section, "every": every}})


def summarize(spec: StudySpec, plan: StudyPlan, results: list[RunResult], finals: list, tuning: TuningOutcome):
    """The cells of both tables (families, adjusted p-values and, for the primary family, bootstrap intervals
    set), the across-depth contrasts, the stability rows (:mod:`.report.stability_table`) and the Markdown, from
    the runs as collected."""
    chosen = tuning.chosen
    cells = cell_results(spec, results, chosen, plan.params, plan.metric)
    cells, contrasts = assign_families(spec, cells, depth_contrasts(spec, cells))
    cells = with_bootstrap(spec, cells, finals, plan.metric, chosen)
    ran = {cell: tuple(lr for lr in rates if lr not in tuning.pending.get(cell, ()))  # a pending extension: not tried
           for cell, rates in tuning.rates.items()}
    stability = stability_rows(spec, results, cells, ran, plan.metric)
    pending = sum(1 for r in results if r.kind == "final" and r.status not in ("finished", "diverged"))
    markdown = study_markdown(spec, cells, plan.metric, study_cost(spec, results, chosen), plan.total_steps, pending,
                              contrasts, tuning, stability)
    return cells, contrasts, stability, markdown


@contextmanager
def _holding(study_dir: Path) -> Iterator[None]:
    """Hold the study folder's lock (``STUDY_DIR/.lock``, :mod:`layerscale.train.state.run_lock`) for a whole study call:
    a second ``layerscale study`` on the same ``--out`` while the first still runs (training or rewriting its
    tables) is refused with one line before it writes anything, instead of its workers colliding with the first's
    runs and its tables overwriting the first's."""
    from ..train.state.run_lock import RunDirectoryInUse, hold_run_dir

    try:
        with hold_run_dir(study_dir):
            yield
    except RunDirectoryInUse as exc:
        holder = str(exc).split(": in use by ", 1)[-1].split(",", 1)[0]
        raise RunDirectoryInUse(f"{study_dir}: another study is running in this folder ({holder}); wait for it to "
                                "end or stop it, then run the command again") from None


def check_study_paths(study_dir: str | os.PathLike, reuse_from: str | os.PathLike | None = None) -> None:
    """Refuse, in one line and before anything of the study is written, a ``study_dir`` that cannot be a study
    folder (a file, a path under a file, a folder that refuses new files:
    :func:`~layerscale.destinations.check_writable_dir`) and a ``reuse_from`` that is no earlier study with run
    folders (:func:`.run.reuse.reuse_source_runs`). A folder that exists and holds files (other than hidden ones,
    such as the lock) but no mark of a study (``study.json``, ``runs/`` or ``runs.tar.xz``) is someone's other work,
    refused as ``layerscale train`` refuses a non-empty folder that is no run: a study starts in a new or empty folder
    and continues only in its own. A run makes these checks first; ``layerscale study --dry-run`` and ``--estimate``
    make the same ones."""
    from ..destinations import check_writable_dir

    check_writable_dir(study_dir, "study folder")
    folder = Path(study_dir)
    if (folder.is_dir() and not any(os.path.lexists(folder / mark) for mark in (SPEC_FILE, "runs", ARCHIVE_FILE))
            and any(not entry.name.startswith(".") for entry in folder.iterdir())):
        raise ValueError(f"{folder}: exists, is not empty and holds no study ({SPEC_FILE}); a study starts in a new "
                         "or empty folder and continues in its own: choose another --out")
    if reuse_from is not None:
        from .run.reuse import reuse_source_runs

        reuse_source_runs(reuse_from)


def run_study(spec: StudySpec, study_dir: str | os.PathLike, *, jobs: int | None = None,
              threads: int | None = None, report: bool = True, progress: bool = True, train: bool = True,
              analyze: bool = False,
              executor: ExecutorOptions | None = None, reuse_from: str | os.PathLike | None = None,
              start_window: float | None = None, log=print) -> StudySummary:
    """Run (or continue) the study in ``study_dir``; write ``results.md``, ``results.csv``, ``runs.csv``,
    ``stability.csv``, ``tuning.json`` and, with ``report``, ``report.html``. Returns what
    it found; runs that failed are in ``failures`` (the others went on). ``train=False`` trains nothing: the tables
    and report of what the run folders hold so far (a cell whose tuning is unfinished has no tuned rate yet). ``executor``: where the
    runs execute (:mod:`layerscale.study.run.executors`; default: as saved in ``study.json``, else the local pool);
    saved in ``study.json`` under ``"executor"``, never part of the design (the results do not depend on it).
    ``reuse_from``: an earlier study folder whose finished runs the design can reuse (:mod:`.reuse`).
    ``start_window``: seconds from now during which runs may start (local executor): after it none starts, those
    in progress end, and the study is summarised as it stands, exactly as with ``train=False`` (the runs not started
    stay pending for the next call). A package it needs and cannot import (``missing_packages_line``: PyYAML,
    safetensors, NumPy, SciPy, the data's reader, matplotlib for the report) is one ``ImportError`` naming them all,
    before anything is written."""
    from .design.needed_packages import missing_packages_line

    study_dir = Path(study_dir)
    missing = missing_packages_line("layerscale study", spec.base, train=train, report=report)
    if missing:  # before anything is written or trained: not one failed run after another
        raise ImportError(missing)
    check_study_paths(study_dir, reuse_from if train else None)
    if train:  # a packed study (runs.tar.xz, no runs/) would otherwise start over
        refuse_packed(study_dir, "training")
    jobs, threads = resolve_parallelism(jobs, threads)
    plan = resolve_plan(spec, study_dir, train=train)
    options = executor or resolve_options(study_dir / SPEC_FILE, {})  # where runs execute: not part of the design
    if start_window is not None and not start_window > 0:
        raise ValueError(f"--start-window must be a positive duration, got {start_window:g} seconds")
    start_by = None if start_window is None else time.monotonic() + start_window
    # the engine is imported now: a missing extra writes nothing
    engine_pool = make_pool(options, study_dir, jobs=jobs, threads=threads, progress=progress, log=log,
                            start_by=start_by) if train else None
    with _holding(study_dir):  # one study at a time in a folder: a second one is refused whole
        write_json_atomic(study_dir / SPEC_FILE, {**spec.to_dict(), "executor": options.to_dict()})
        write_plan(study_dir, plan)
        spec = _with_enough_diagnostics(spec, plan.total_steps)
        if reuse_from is not None and train:
            from .run.reuse import reuse_finished_runs

            reuse_finished_runs(spec, study_dir, Path(reuse_from), log=log)

        def pool(runs, desc):
            if not train or not window_open(start_by):  # past the window: what the run folders hold, as train=False
                return []
            return engine_pool(runs, desc)

        tuning = tune_study(spec, study_dir, plan.total_steps, plan.metric.higher_is_better, pool)
        chosen, rungs, failures = tuning.chosen, tuning.rungs, list(tuning.failures)
        finals = spec.final_runs(study_dir, chosen, every_rate=tuning.rates if spec.tuning == "grid" else None)
        failures += pool(finals, "final runs")
        results = [collect_run(r, plan.metric, spec.target) for r in [*tuning.tune_runs, *finals]]
        cells, contrasts, stability, markdown = summarize(spec, plan, results, finals, tuning)
        if analyze:
            from .report.depth_use import analyze_final_runs, effective_depth_markdown

            markdown += "\n" + effective_depth_markdown(spec, analyze_final_runs(spec, finals, results, chosen, log=log))
        paths = write_tables(study_dir, results, cells, plan.metric, markdown, contrasts, stability)
        if report:
            from .report.html_report import write_study_report

            from .report.html_report import headline_path

            paths["report"] = write_study_report(study_dir, spec, plan, results, cells, rungs, markdown)
            paths["headline"] = headline_path(study_dir, plan.metric)
        return StudySummary(study_dir, results, cells, chosen, rungs, markdown, paths, failures, contrasts, tuning,
                            stability)
