"""``--executor ray``: each run a Ray task asking for ``num_cpus=cpus_per_run, num_gpus=gpus_per_run``, on the Ray
cluster at ``ray_address`` or on a Ray instance started on this machine.

The task runs :func:`layerscale.study.run.executors.run_task.execute` — the local pool's worker (``torchrun`` inside
the task for ``gpus_per_run > 1``) — so the results are those of the local pool. Ray places the tasks by their
resource requests; every node must see the study directory at the same path (a shared file system) and have
``torch-layerscale`` installed.

**Lost workers.** When the process running a task dies (its node is lost, it is killed), Ray runs the task again
(up to ``MAX_RETRIES`` times); the worker resumes from the run's latest checkpoint. A task that still fails is a
failed run: reported with its log, the others go on, and rerunning the study retries it from its checkpoint.
If the study is interrupted its tasks are cancelled, which stops their workers.
"""

from __future__ import annotations

from pathlib import Path

import ray

from ..executor import RunFailure, pending_runs
from ...design.grid import RunSpec
from .options import ExecutorOptions
from .run_task import execute, task_for
from .tracker import PoolTracker, last_line

__all__ = ["MAX_RETRIES", "connect", "remote_options", "run_ray_pool"]

#: Times Ray reruns a task whose worker process died (each rerun resumes from the run's checkpoint).
MAX_RETRIES = 3
POLL_S = 1.0


def remote_options(options: ExecutorOptions, threads: int) -> dict:
    """The ``.options(...)`` of each run's task (also what ``--dry-run`` prints)."""
    return {"num_cpus": options.cpus_per_run or threads, "num_gpus": options.gpus_per_run,
            "max_retries": MAX_RETRIES, "retry_exceptions": False}


def connect(options: ExecutorOptions, log=print) -> None:
    """Join the Ray cluster at ``options.ray_address`` (or start one on this machine), unless connected."""
    if ray.is_initialized():
        return
    try:
        ray.init(address=options.ray_address, include_dashboard=False, log_to_driver=False)
    except ConnectionError as exc:
        raise ValueError(f"--ray-address {options.ray_address!r}: cannot connect ({exc})") from None
    resources = ray.cluster_resources()
    log(f"ray: connected to {options.ray_address or 'a new local instance'} "
        f"({resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs)")


def run_ray_pool(runs: list[RunSpec], study_dir: Path, options: ExecutorOptions, *, threads: int,
                 progress: bool = True, desc: str = "study", log=print) -> list[RunFailure]:
    """Run every pending run of ``runs`` as a Ray task, wait for all, return the runs that failed."""
    pending = pending_runs(runs, desc, log)
    if not pending:
        return []
    connect(options, log)
    request = remote_options(options, threads)
    available = ray.cluster_resources()
    for resource, key in (("CPU", "num_cpus"), ("GPU", "num_gpus")):
        if request[key] > available.get(resource, 0):
            raise ValueError(f"each run asks for {request[key]} {resource}(s) (--{key.split('_')[1]}-per-run) but "
                             f"the Ray cluster has {available.get(resource, 0):g}")
    # the task is run_task.execute itself: a Ray worker imports that module (not torch; the worker it starts does)
    remote = ray.remote(execute).options(**request)
    tasks = [task_for(r, study_dir, request["num_cpus"], options.gpus_per_run) for r in pending]
    waiting = {remote.remote(task): (run, task) for run, task in zip(pending, tasks)}
    tracker = PoolTracker(runs, pending, desc, progress, log)
    try:
        while waiting:
            ready, _ = ray.wait(list(waiting), num_returns=1, timeout=POLL_S)
            for ref in ready:
                run, task = waiting.pop(ref)
                code, error = None, None
                try:
                    code = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task failed after its retries, or was cancelled
                    lines = [line for line in str(exc).splitlines() if line.strip()]
                    error = (f"Ray task failed ({type(exc).__name__}: {lines[-1] if lines else ''}); "
                             f"run log: {last_line(Path(task.log_path))}")
                tracker.finished(run, Path(task.log_path), code, error)
    finally:
        for ref in waiting:  # interrupted: no task may train on behind a study that is gone
            ray.cancel(ref, force=True)
        tracker.close()
    return tracker.failures
