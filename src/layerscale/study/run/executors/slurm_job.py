"""The callable each submitit job runs: one study run, checkpointable so that Slurm's warning signal requeues it.

Kept apart from the driver (:mod:`.submitit_slurm`): a job unpickles this and imports only it, submitit and
:mod:`.run_task` — not torch, which only the worker it starts imports — so a job starts as fast as it can.
"""

from __future__ import annotations

import time

import submitit

from .run_task import RunTask, execute

__all__ = ["SlurmRun"]


class SlurmRun(submitit.helpers.Checkpointable):
    """One study run as a submitit job (:func:`layerscale.study.run.executors.run_task.execute` on its node(s))."""

    def __init__(self, task: RunTask) -> None:
        self.task = task

    def __call__(self) -> int:
        """Train the run on this job's node(s); returns the worker's exit status. A multi-node run has one task per
        node, each starting ``torchrun`` for its node, rendezvous at the job's first node."""
        if not self.task.distributed:
            return execute(self.task)
        env = submitit.JobEnvironment()
        dist = submitit.helpers.TorchDistributedEnvironment()
        return execute(self.task, node_rank=env.node, master_addr=dist.master_addr, master_port=dist.master_port)

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        """Called by submitit on Slurm's warning signal (``SIGUSR2``: preemption or the time limit is near): requeue
        the same run. Its state is the checkpoints in its run directory, so nothing else needs saving; the requeued
        job's worker resumes from the latest one. The job then exits, which stops the worker."""
        with open(self.task.log_path, "a", encoding="utf-8") as log:
            log.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {self.task.run_id}: preempted or at the time limit; "
                      "requeued, it resumes from its latest checkpoint\n")
        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)
