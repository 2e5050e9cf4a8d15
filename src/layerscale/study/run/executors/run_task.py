"""One study run as a cluster engine executes it: the same worker process the local pool starts, on another machine.

:class:`RunTask` is what a Slurm job (:mod:`.submitit_slurm`) or a Ray task (:mod:`.ray_cluster`) carries: the
run's directory and config, where its log goes, its threads and, for a multi-process run, its GPUs and nodes.
:func:`execute` runs on the machine that trains. It writes the run's config to
``STUDY/configs/<kind>/<run_id>.json``, then starts

- one process, ``python -c BOOTSTRAP <this pid> RUN_DIR CONFIG THREADS`` — exactly the worker of the local pool
  (:data:`layerscale.study.run.worker.BOOTSTRAP`: it resumes from the run's latest checkpoint, writes
  ``study_status.json``, and dies with the process that started it); or
- with more than one GPU or node, ``python -m layerscale.train.launch`` (``torchrun``) on each node, whose processes
  run the same :func:`layerscale.study.run.worker.main` (:mod:`.ddp_worker`); rank 0 writes.

Its output goes to ``STUDY/logs/<kind>/<run_id>.log`` (node ``k > 0`` of a multi-node run: ``….log.node<k>``),
where the local pool writes it too. A run therefore writes only its own run directory, its config and its log, on
any engine, and the study directory (on a file system every node shares) is the whole state of the study.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....atomic_io import write_json_atomic
from ..worker import BOOTSTRAP
from .study_watch import stop_when_gone

if TYPE_CHECKING:  # not at run time: the job process that unpickles a RunTask should not import torch
    from ...design.grid import RunSpec

__all__ = ["RunTask", "execute", "task_for", "config_path_of", "log_path_of", "worker_command"]

CONFIG_DIR = "configs"
LOG_DIR = "logs"


def config_path_of(study_dir: Path, run: RunSpec) -> Path:
    """Where the run's config is written before it starts (the local pool's layout)."""
    return Path(study_dir) / CONFIG_DIR / run.kind / f"{run.run_id}.json"


def log_path_of(study_dir: Path, run: RunSpec) -> Path:
    """The run's log (the local pool's layout); a restarted run appends to it."""
    return Path(study_dir) / LOG_DIR / run.kind / f"{run.run_id}.log"


@dataclass(frozen=True)
class RunTask:
    """Everything one run needs on the machine that trains it (plain data: it is pickled to Slurm or Ray)."""

    run_id: str
    kind: str
    run_dir: str
    config: dict[str, Any]
    config_path: str
    log_path: str
    threads: int
    gpus_per_node: int = 0
    nodes: int = 1
    study: str | None = None  # process_identity of the study, for a job on its machine: the job shares its fate

    @property
    def distributed(self) -> bool:
        return self.nodes > 1 or self.gpus_per_node > 1


def task_for(run: RunSpec, study_dir: Path, threads: int, gpus_per_node: int = 0, nodes: int = 1,
             study: str | None = None) -> RunTask:
    """The :class:`RunTask` of ``run`` in ``study_dir``; ``study``: see :attr:`RunTask.study`."""
    return RunTask(run.run_id, run.kind, str(run.run_dir), run.config, str(config_path_of(study_dir, run)),
                   str(log_path_of(study_dir, run)), threads, gpus_per_node, nodes, study)


def worker_command(task: RunTask, *, node_rank: int = 0, master_addr: str = "127.0.0.1",
                   master_port: int = 29500, parent_pid: int | None = None) -> list[str]:
    """The command that trains ``task`` on this node: the local pool's bootstrap for a one-process run; for a
    multi-process run, ``torchrun`` (``layerscale.train.launch``) with ``gpus_per_node`` processes per node over
    ``nodes`` nodes, rendezvous at ``master_addr:master_port`` (node 0; one node: ``--standalone``)."""
    if not task.distributed:
        parent = os.getpid() if parent_pid is None else parent_pid
        return [sys.executable, "-c", BOOTSTRAP, str(parent), task.run_dir, task.config_path, str(task.threads)]
    if task.nodes == 1:  # one node: torchrun's own rendezvous on a free port (runs sharing a node never clash)
        rendezvous = ["--standalone", "--nnodes=1"]
    else:
        rendezvous = [f"--nnodes={task.nodes}", f"--node_rank={node_rank}", f"--master_addr={master_addr}",
                      f"--master_port={master_port}"]
    return [sys.executable, "-m", "layerscale.train.launch", *rendezvous,
            f"--nproc_per_node={max(1, task.gpus_per_node)}",
            "-m", "layerscale.study.run.executors.ddp_worker", task.run_dir, task.config_path, str(task.threads)]


def _latest_checkpoint_name(run_dir: Path) -> str | None:
    """Name of the run's newest complete checkpoint (``checkpoints/step_*``, see
    :mod:`layerscale.train.state.checkpoint`), without importing torch."""
    root = run_dir / "checkpoints"
    names = sorted(p.name for p in root.glob("step_*") if p.is_dir()) if root.is_dir() else []
    return names[-1] if names else None


def execute(task: RunTask, *, node_rank: int = 0, master_addr: str = "127.0.0.1", master_port: int = 29500) -> int:
    """Train ``task`` on this machine (node ``node_rank`` of its run) and return the worker's exit status.

    Node 0 writes the config first; for a multi-process run it also removes a run directory that never reached
    its first checkpoint (what the worker does for a one-process run) before any process starts, so no rank sees
    a half-started directory. If this process is stopped (Slurm's preemption signal, a cancelled Ray task), the
    worker is stopped with it; the next attempt resumes from the run's latest checkpoint. A task that carries its
    study's identity (a job on the study's machine) also stops the worker when the study process is gone
    (:mod:`.study_watch`)."""
    run_dir, log_path = Path(task.run_dir), Path(task.log_path)
    if node_rank == 0:
        Path(task.config_path).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(task.config_path, task.config)
        if task.distributed and run_dir.is_dir() and _latest_checkpoint_name(run_dir) is None:
            from ....train.state.run_lock import clear_run_dir, hold_run_dir

            with hold_run_dir(run_dir):  # never under a live worker of this run (RunDirectoryInUse)
                clear_run_dir(run_dir)
    else:
        log_path = log_path.with_name(f"{log_path.name}.node{node_rank}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = _latest_checkpoint_name(run_dir)
    with open(log_path, "a", encoding="utf-8") as log:
        start = f"resuming from {checkpoint}" if checkpoint else "starting"
        log.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {task.run_id}: {start} on {socket.gethostname()} "
                  f"(pid {os.getpid()})\n")
        log.flush()
        env = dict(os.environ, OMP_NUM_THREADS=str(task.threads), MKL_NUM_THREADS=str(task.threads))
        proc = subprocess.Popen(worker_command(task, node_rank=node_rank, master_addr=master_addr,
                                               master_port=master_port),
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        if task.study is not None:
            def note(text: str) -> None:
                log.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {task.run_id}: {text}\n")
                log.flush()

            stop_when_gone(task.study, proc, note)
        try:
            return proc.wait()
        finally:  # interrupted (a signal handler raised): the worker must not train on without us
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
