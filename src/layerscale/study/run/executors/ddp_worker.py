"""``torchrun … -m layerscale.study.run.executors.ddp_worker RUN_DIR CONFIG THREADS``: one process of a multi-process
study run (several GPUs or nodes, :func:`layerscale.study.run.executors.run_task.worker_command`).

It runs the same :func:`layerscale.study.run.worker.main` as a one-process run, with the ``torchrun`` agent that
started it as the parent it stops with (the agent's own death, or Slurm ending the job, stops every rank). Under
``torchrun`` the trainer joins the process group from the environment and rank 0 writes the run directory.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """``argv``: ``RUN_DIR CONFIG THREADS``; returns the worker's exit status."""
    if len(argv) != 3:
        raise SystemExit(f"usage: ddp_worker RUN_DIR CONFIG THREADS, got {argv}")
    from ..worker import main as worker_main

    return worker_main([str(os.getppid()), *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
