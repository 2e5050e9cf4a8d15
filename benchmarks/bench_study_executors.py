"""Executor overhead per study run: submission + start-up of one tiny run through each engine.

One run (ViT width 16, depth 1, digits, ``--steps`` optimizer steps: the training itself is negligible) is run
start to finish through the local pool, submitit's ``LocalExecutor`` (real job processes, as a Slurm job starts
them, without a Slurm queue's wait) and a Ray instance on this machine, interleaved round by round (the order
rotates), each time in a fresh study directory. For each sample:

- ``total``: wall time from handing the run to the engine until the engine reports it done;
- ``dispatch``: from handing it over until the worker process is started on the "node" (the run's config file is
  written right before, by the pool or by the job / task);
- ``collect``: from the worker's end (its ``study_status.json``) until the engine reports the run done.

``dispatch + collect`` is the engine's own overhead per run; the worker between them (starting Python, importing
torch, loading the data, training) is the same code on every engine. Ray's one-time ``ray.init`` is reported apart.

    .venv/bin/python benchmarks/bench_study_executors.py --rounds 3
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from pathlib import Path

BASE = {
    "model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "mlp_ratio": 1.0},
    "data": {"name": "digits", "batch_size": 64, "augment": False},
    "optim": {"epochs": 1, "max_steps": 1, "lr": 1e-3, "warmup_steps": 0},
    "run": {"progress": "none", "checkpoint_every_steps": 0, "keep_checkpoints": 1, "eval_every_steps": 0},
    "diagnostics": {"enabled": False},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1, help="optimizer steps of the tiny run")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import ray

    from layerscale.study.run.executor import run_pool
    from layerscale.study.run.executors import ExecutorOptions
    from layerscale.study.run.executors.ray_cluster import run_ray_pool
    from layerscale.study.run.executors.submitit_slurm import run_submitit_pool
    from layerscale.study.design.grid import StudySpec

    base = copy.deepcopy(BASE)
    base["optim"]["max_steps"] = args.steps
    spec = StudySpec(("prenorm",), (1,), (0,), base=base, lrs=(1e-3,), validation_fraction=0.1)
    root = Path(tempfile.mkdtemp(prefix="bench-executors-"))
    counter = iter(range(10**6))
    quiet = dict(progress=False, desc="bench", log=lambda *_: None)

    def one_run(pool) -> tuple[float, float, float]:
        study_dir = root / f"s{next(counter)}"
        run = spec.run(study_dir, "prenorm", 1, 1e-3, 0, "final")
        start = time.time()
        failures = pool([run], study_dir)
        end = time.time()
        if failures:
            raise RuntimeError(f"run failed: {failures[0]}")
        started = (study_dir / "configs" / "final" / f"{run.run_id}.json").stat().st_mtime
        finished = (run.run_dir / "study_status.json").stat().st_mtime
        return end - start, started - start, end - finished

    start = time.perf_counter()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    ray_init_s = time.perf_counter() - start
    submitit_options, ray_options = ExecutorOptions("submitit", submitit_cluster="local"), ExecutorOptions("ray")
    pools = {
        "local": lambda runs, d: run_pool(runs, d, jobs=1, threads=1, **quiet),
        "submitit-local": lambda runs, d: run_submitit_pool(runs, d, submitit_options, threads=1, **quiet),
        "ray": lambda runs, d: run_ray_pool(runs, d, ray_options, threads=1, **quiet),
    }
    for pool in pools.values():  # warm-up: first imports, Ray's first worker process
        one_run(pool)
    samples = {name: [] for name in pools}
    names = list(pools)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(one_run(pools[name]))
    ray.shutdown()
    print(f"one tiny run ({args.steps} step(s)), medians of {args.rounds} rounds; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"  {'engine':<15} {'total (s)':>10} {'dispatch (s)':>13} {'collect (s)':>12} {'overhead (s)':>13}")
    for name, values in samples.items():
        total, dispatch, collect = (statistics.median(v[i] for v in values) for i in range(3))
        overhead = statistics.median(v[1] + v[2] for v in values)
        print(f"  {name:<15} {total:10.2f} {dispatch:13.2f} {collect:12.2f} {overhead:13.2f}")
    print(f"  ray.init (once per study): {ray_init_s:.2f} s")


if __name__ == "__main__":
    main()
