"""Running a list of study runs: several at once, each in its own process, resumable, failures isolated.

A run is done when its ``study_status.json`` says ``finished`` or ``diverged``, or ``paused`` at (or past) the step
the run is asked to reach; a run with a checkpoint and nothing more is resumed from it; anything else starts afresh.
``jobs`` processes run at once with ``threads`` intra-op threads each: on a small CPU several single-threaded runs
at once finish a grid sooner than one run with every thread (``benchmarks/bench_study_parallel.py``), so the default
is one job per core. A run that fails (exits non-zero without a status; divergence is a result, not a failure) is
reported with its log and the others go on; :func:`run_pool` returns the failures.

``start_by`` (a :func:`time.monotonic` instant) closes the pool's start window: after it no run is started, the runs
in progress go on to their end, and the runs not started stay pending for the next invocation (``layerscale study
--start-window``: a session or an allocation that ends at a known time loses no half-trained run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from ...atomic_io import write_json_atomic
from ..design.grid import RunSpec
from .run_failure import RunFailure, last_line
from .worker import BOOTSTRAP, read_status

__all__ = ["MAX_PARALLEL", "RunFailure", "default_parallelism", "is_done", "last_line", "pending_runs",
           "resolve_parallelism", "run_pool", "window_open"]


#: The most runs at once (``--jobs``) and threads per run (``--threads``): far above any machine's cores, and a
#: typo such as ``--threads 100000`` is refused before a worker asks torch for that many threads.
MAX_PARALLEL = 1024


def default_parallelism(cores: int | None = None) -> tuple[int, int]:
    """``(jobs, threads)``: one single-threaded job per available core (at most :data:`MAX_PARALLEL`)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_PARALLEL)), 1


def resolve_parallelism(jobs: int | None, threads: int | None) -> tuple[int, int]:
    """``(jobs, threads)`` as given, ``None`` replaced by :func:`default_parallelism`'s; below 1 or above
    :data:`MAX_PARALLEL` is a one-line ``ValueError`` (``0`` is not "automatic")."""
    auto_jobs, auto_threads = default_parallelism()
    jobs = auto_jobs if jobs is None else jobs
    threads = auto_threads if threads is None else threads
    if jobs < 1 or threads < 1:
        raise ValueError(f"--jobs and --threads must be >= 1, got {jobs} and {threads}")
    if jobs > MAX_PARALLEL or threads > MAX_PARALLEL:
        raise ValueError(f"--jobs and --threads must be at most {MAX_PARALLEL} (this library's limit), got {jobs} "
                         f"and {threads}")
    return jobs, threads


def is_done(run: RunSpec) -> bool:
    """Whether ``run`` needs no more training (see the module docstring)."""
    status = read_status(run.run_dir)
    if status is None:
        return False
    if status.get("status") != "paused":
        return True
    return bool(run.stop_at_step) and int(status.get("step") or 0) >= run.stop_at_step


def pending_runs(runs: list[RunSpec], desc: str, log=print) -> list[RunSpec]:
    """The runs of ``runs`` that still need training, saying how many are already done (every engine's start)."""
    pending = [r for r in runs if not is_done(r)]
    done = len(runs) - len(pending)
    if done and pending:
        log(f"{desc}: {done} of {len(runs)} runs already done, {len(pending)} to go")
    return pending


def window_open(start_by: float | None) -> bool:
    """Whether a run may still start: no start window, or its end ``start_by`` (:func:`time.monotonic`) not reached."""
    return start_by is None or time.monotonic() < start_by


def run_pool(runs: list[RunSpec], study_dir: str | os.PathLike, *, jobs: int, threads: int, progress: bool = True,
             desc: str = "study", log=print, start_by: float | None = None) -> list[RunFailure]:
    """Run every pending run of ``runs`` (configs already validated) that starts before ``start_by`` (see the
    module docstring); returns the runs that failed."""
    study_dir = Path(study_dir)
    if jobs < 1 or threads < 1:
        raise ValueError(f"--jobs and --threads must be >= 1, got {jobs} and {threads}")
    from .executors.tracker import PoolTracker

    pending = deque(pending_runs(runs, desc, log))
    if not pending:
        return []
    tracker = PoolTracker(runs, list(pending), desc, progress, log)
    running: dict[str, tuple[subprocess.Popen, RunSpec, object]] = {}
    try:
        while running or (pending and window_open(start_by)):
            while pending and len(running) < jobs and window_open(start_by):
                run = pending.popleft()
                running[run.run_id + run.kind] = _start(run, study_dir, threads)
            time.sleep(0.2)
            for key, (proc, run, log_file) in list(running.items()):
                if proc.poll() is None:
                    continue
                log_file.close()
                del running[key]
                tracker.finished(run, _log_path(study_dir, run), proc.returncode)
    finally:
        for proc, _, log_file in running.values():
            proc.terminate()
            proc.wait()
            log_file.close()
        tracker.close()
    if pending:
        log(f"{desc}: the start window closed; {len(pending)} run(s) not started (they stay pending: run the same "
            "command again to continue)")
    return tracker.failures


def _log_path(study_dir: Path, run: RunSpec) -> Path:
    return study_dir / "logs" / run.kind / f"{run.run_id}.log"


def _start(run: RunSpec, study_dir: Path, threads: int):
    config_path = study_dir / "configs" / run.kind / f"{run.run_id}.json"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(config_path, run.config)
    log_path = _log_path(study_dir, run)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(log_path, "a", encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.Popen(
        [sys.executable, "-c", BOOTSTRAP, str(os.getpid()), str(run.run_dir), str(config_path), str(threads)],
        stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
    )
    return proc, run, log_file
