"""``--executor submitit``: each run a Slurm job, one job array per tuning rung and one for the final runs, through
``submitit`` (the engine of the DeiT / CaiT reference code's cluster runs).

Per run the job asks for ``nodes_per_run`` nodes with one task each, ``gpus_per_run`` GPUs and ``cpus_per_run``
cores per node, ``slurm_time`` minutes, on ``slurm_partition`` (:func:`submission_parameters`). The job
(:class:`~layerscale.study.run.executors.slurm_job.SlurmRun`) runs :func:`layerscale.study.run.executors.run_task.execute`:
the local pool's worker, or ``torchrun`` on every node for a multi-process run.

**Preemption and time limits.** submitit asks Slurm to send ``SIGUSR2`` ``SIGNAL_DELAY_S`` seconds before the
time limit and on preemption; the job (a :class:`submitit.helpers.Checkpointable`) then stops its worker and
requeues itself with the same run. The requeued job starts the worker again, which resumes from the run's latest
checkpoint in its run directory (``run.checkpoint_every_steps`` bounds what is lost). A job that fails or is
cancelled is a failed run: reported with its log, the others go on, and rerunning the study retries it from its
checkpoint.

**On this machine** (``submitit_cluster: local``) a job's controller outlives the study that submitted it; each job
therefore watches the study process and stops its worker once the study is gone (:mod:`.study_watch`), so a killed
study leaves nothing training. On any cluster a worker holds its run directory's lock
(:mod:`layerscale.train.state.run_lock`): a second worker for a run still trained by a live one is refused.
"""

from __future__ import annotations

import time
from pathlib import Path

import submitit

from ..executor import RunFailure, pending_runs
from ...design.grid import RunSpec
from .options import ExecutorOptions
from .run_task import task_for
from .slurm_job import SlurmRun
from .study_watch import process_identity
from .tracker import PoolTracker, last_line

__all__ = ["SIGNAL_DELAY_S", "submission_parameters", "run_submitit_pool"]

#: Seconds between Slurm's warning signal and the time limit: time to stop the worker and requeue.
SIGNAL_DELAY_S = 120
POLL_S = 1.0


def submission_parameters(options: ExecutorOptions, threads: int, array_size: int, name: str) -> dict:
    """The ``AutoExecutor.update_parameters`` of one job array (also what ``--dry-run`` prints)."""
    parameters = {"name": name, "timeout_min": options.slurm_time, "nodes": options.nodes_per_run,
                  "tasks_per_node": 1, "gpus_per_node": options.gpus_per_run,
                  "cpus_per_task": options.cpus_per_run or threads, "slurm_signal_delay_s": SIGNAL_DELAY_S,
                  "slurm_array_parallelism": max(1, array_size), "stderr_to_stdout": True}
    if options.slurm_partition:
        parameters["slurm_partition"] = options.slurm_partition
    return parameters


def make_executor(options: ExecutorOptions, study_dir: Path):
    """The submitit executor writing its job files under ``STUDY/submitit/``."""
    try:
        return submitit.AutoExecutor(folder=study_dir / "submitit" / "%j", cluster=options.submitit_cluster)
    except RuntimeError as exc:  # e.g. cluster "slurm" forced where there is no srun
        raise ValueError(f"--executor submitit: {exc}") from None


def run_submitit_pool(runs: list[RunSpec], study_dir: Path, options: ExecutorOptions, *, threads: int,
                      progress: bool = True, desc: str = "study", log=print) -> list[RunFailure]:
    """Submit every pending run of ``runs`` as one job array, wait for all, return the runs that failed."""
    pending = pending_runs(runs, desc, log)
    if not pending:
        return []
    executor = make_executor(options, study_dir)
    executor.update_parameters(**submission_parameters(options, threads, len(pending),
                                                       f"layerscale-{study_dir.name}"))
    threads_per_run = options.cpus_per_run or threads
    # Local jobs outlive the session that submits them: they share the study's fate instead (study_watch).
    study = process_identity() if executor.cluster == "local" else None
    tasks = [task_for(r, study_dir, threads_per_run, options.gpus_per_run, options.nodes_per_run, study)
             for r in pending]
    with executor.batch():
        jobs = [executor.submit(SlurmRun(task)) for task in tasks]
    log(f"{desc}: submitted {len(jobs)} run(s) through submitit ({executor.cluster}), jobs "
        f"{jobs[0].job_id}{' .. ' + jobs[-1].job_id if len(jobs) > 1 else ''}")
    tracker = PoolTracker(runs, pending, desc, progress, log)
    waiting = list(zip(jobs, pending, tasks))
    try:
        while waiting:
            time.sleep(POLL_S)
            for item in [w for w in waiting if w[0].done()]:
                waiting.remove(item)
                job, run, task = item
                code, error = None, None
                try:
                    code = job.result()
                except Exception as exc:  # the job itself failed: killed, out of memory, cancelled, not requeued
                    lines = [line for line in str(exc).splitlines() if line.strip()]
                    error = (f"Slurm job {job.job_id} failed ({lines[-1] if lines else type(exc).__name__}); "
                             f"job log {job.paths.stdout}; run log: {last_line(Path(task.log_path))}")
                tracker.finished(run, Path(task.log_path), code, error)
    finally:
        for job, _, _ in waiting:  # interrupted: no job may train on behind a study that is gone
            job.cancel(check=False)
        tracker.close()
    return tracker.failures
