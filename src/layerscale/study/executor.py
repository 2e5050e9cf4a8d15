"""Running a study grid: several runs at once, each in its own process, resumable.

A run is done when its directory holds ``study_status.json`` (finished or diverged); a run with a checkpoint but no
status is resumed from it; anything else starts afresh. ``jobs`` processes run at once with ``threads`` intra-op
threads each; on a small CPU, several single-threaded runs at once finish a grid sooner than one run with every
thread (``benchmarks/bench_study_parallel.py`` measures it), so the default is one job per core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from ..atomic_io import write_json_atomic
from ..train.config import TrainConfig
from .grid import RUNS_DIR, SPEC_FILE, RunSpec, StudySpec
from .worker import STATUS_FILE

__all__ = ["run_grid", "default_parallelism"]


def default_parallelism(cores: int | None = None) -> tuple[int, int]:
    """``(jobs, threads)``: one single-threaded job per available core."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores), 1


def _progress(total: int, initial: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc="study", unit="run", dynamic_ncols=True)


def run_grid(spec: StudySpec, study_dir: str | os.PathLike, *, jobs: int | None = None, threads: int | None = None,
             progress: bool = True, log=print) -> list[RunSpec]:
    """Run every pending cell of ``spec`` under ``study_dir``; returns the grid.

    Every run's config is validated before anything starts or is written (a bad key is one ``ValueError``). A run
    that fails (not by divergence, which is a result) stops the study with a ``RuntimeError`` naming the run and
    the last line of its log; finished runs are kept.
    """
    study_dir = Path(study_dir)
    auto_jobs, auto_threads = default_parallelism()
    jobs, threads = jobs or auto_jobs, threads or auto_threads
    if jobs < 1 or threads < 1:
        raise ValueError(f"--jobs and --threads must be >= 1, got {jobs} and {threads}")
    spec.check_compatible(study_dir)
    runs = spec.runs(study_dir)
    for r in runs:
        TrainConfig.from_dict(r.config)
    study_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(study_dir / SPEC_FILE, spec.to_dict())
    (study_dir / RUNS_DIR).mkdir(parents=True, exist_ok=True)
    pending = deque(r for r in runs if not (Path(r.config["run"]["out_dir"]) / STATUS_FILE).is_file())
    done = len(runs) - len(pending)
    if done:
        log(f"study {study_dir}: {done} of {len(runs)} runs already done, {len(pending)} to go")
    bar = _progress(len(runs), done, progress)
    running: dict[str, tuple[subprocess.Popen, RunSpec, object]] = {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                run = pending.popleft()
                running[run.run_id] = _start(run, study_dir, threads)
            time.sleep(0.2)
            for run_id, (proc, run, log_file) in list(running.items()):
                if proc.poll() is None:
                    continue
                log_file.close()
                del running[run_id]
                run_dir = Path(run.config["run"]["out_dir"])
                if proc.returncode != 0 or not (run_dir / STATUS_FILE).is_file():
                    raise RuntimeError(f"run {run_id} failed (exit {proc.returncode}): "
                                       f"{_last_line(study_dir / 'logs' / (run_id + '.log'))}")
                status = json.loads((run_dir / STATUS_FILE).read_text(encoding="utf-8"))["status"]
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"{run_id}: {status}")
                else:
                    done += 1
                    log(f"[{done}/{len(runs)}] {run_id}: {status}")
    finally:
        for proc, _, log_file in running.values():
            proc.terminate()
            proc.wait()
            log_file.close()
        if bar is not None:
            bar.close()
    return runs


def _start(run: RunSpec, study_dir: Path, threads: int):
    config_path = study_dir / "configs" / f"{run.run_id}.json"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(config_path, run.config)
    log_path = study_dir / "logs" / f"{run.run_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(log_path, "a", encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.Popen(
        [sys.executable, "-m", "layerscale.study.worker", run.config["run"]["out_dir"], str(config_path),
         str(threads)],
        stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
    )
    return proc, run, log_file


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"
