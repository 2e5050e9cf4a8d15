"""The executor flags of ``layerscale study`` and ``--dry-run`` (see :mod:`layerscale.study.run.executors`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import ENGINES, ExecutorOptions, resolve_options

__all__ = ["add_executor_arguments", "executor_options", "dry_run", "shard"]


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor``, the per-run resources and ``--dry-run``. Unset flags keep the values saved in the study's
    ``study.json`` (when continuing a study), else the defaults."""
    group = parser.add_argument_group("where the runs execute (saved in study.json; results do not depend on it)")
    group.add_argument("--executor", choices=ENGINES,
                       help="local: a process pool on this machine (default); submitit: one Slurm job per run, "
                            "a job array per tuning rung and for the final runs, requeued on preemption "
                            "(pip install 'torch-layerscale[slurm]'); ray: one Ray task per run "
                            "(pip install 'torch-layerscale[ray]')")
    group.add_argument("--slurm-partition", help="submitit: the Slurm partition (default: the cluster's)")
    group.add_argument("--slurm-time", help="submitit: time limit per job, minutes or HH:MM:SS / D-HH:MM:SS "
                                            "(default 60); a run longer than that is requeued and resumes")
    group.add_argument("--gpus-per-run", type=int, help="submitit / ray: GPUs per run (per node); more than one "
                                                        "runs the worker under torchrun (DDP)")
    group.add_argument("--cpus-per-run", type=int, help="submitit / ray: CPU cores (and threads) per run "
                                                        "(default: --threads)")
    group.add_argument("--nodes-per-run", type=int, help="submitit: nodes per run (multi-node DDP, torchrun on "
                                                         "each node; default 1)")
    group.add_argument("--ray-address", help="ray: address of the Ray cluster (ray.init(address=...)), e.g. auto "
                                             "or ray://head:10001 (default: a Ray instance on this machine)")
    group.add_argument("--dry-run", action="store_true",
                       help="print every run of the plan and what the executor would submit; submit and write "
                            "nothing")


def executor_options(args: argparse.Namespace, study_dir: Path) -> ExecutorOptions:
    """The options the flags give, over those saved in ``study_dir/study.json``."""
    from ...design.grid import SPEC_FILE

    given = {"engine": args.executor, "slurm_partition": args.slurm_partition, "slurm_time": args.slurm_time,
             "gpus_per_run": args.gpus_per_run, "cpus_per_run": args.cpus_per_run,
             "nodes_per_run": args.nodes_per_run, "ray_address": args.ray_address}
    return resolve_options(Path(study_dir) / SPEC_FILE, given)


def dry_run(spec, study_dir: Path, options: ExecutorOptions, jobs: int | None, threads: int | None) -> str:
    """Validate the study as a real run would (nothing written) and describe its runs and submissions."""
    from ..executor import resolve_parallelism
    from ...design.plan import plan_study
    from .dry_run import describe_plan

    jobs, threads = resolve_parallelism(jobs, threads)
    plan = plan_study(spec, Path(study_dir))
    return describe_plan(spec, Path(study_dir), plan.total_steps, plan.data_description, options, jobs=jobs,
                         threads=threads, higher_is_better=plan.metric.higher_is_better)


def shard(text: str) -> tuple[int, int]:
    """An argparse ``type`` for ``--shard I/N``: the pair (I, N), 0 <= I < N; a process with shard I/N takes every
    N-th item of a work list from the I-th (``items[I::N]``), so N processes split the list without talking."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        index, count = -1, 0
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"{text!r}: expected I/N with 0 <= I < N, e.g. 0/2")
    return index, count
