"""Where a study's runs execute: ``local`` (the study's process pool), ``submitit`` (Slurm job arrays) or ``ray``
(Ray tasks). Every engine runs the same worker on the same configs, so the results are the same; see
:mod:`.options` for the settings, :mod:`.submitit_slurm` and :mod:`.ray_cluster` for the engines.

:func:`make_pool` returns the ``pool(runs, desc) -> list[RunFailure]`` callable that
:func:`layerscale.study.study.run_study` hands each tuning rung and the final runs to. It imports the engine
first, so a missing extra is one ``ImportError`` naming it, raised before the study writes anything.
"""

from __future__ import annotations

from pathlib import Path

from .options import ENGINES, ExecutorOptions, parse_slurm_time, resolve_options

__all__ = ["ENGINES", "ExecutorOptions", "make_pool", "load_engine", "parse_slurm_time", "resolve_options"]

_EXTRAS = {"submitit": ("submitit", "slurm"), "ray": ("ray", "ray")}


def load_engine(engine: str):
    """The module of ``engine`` (imported now); ``ImportError`` naming the extra to install when it is missing."""
    if engine == "local":
        from .. import executor

        return executor
    package, extra = _EXTRAS[engine]
    try:
        if engine == "submitit":
            from . import submitit_slurm as module
        else:
            from . import ray_cluster as module
    except ImportError as exc:
        if exc.name != package and not str(exc.name or "").startswith(package + "."):
            raise
        raise ImportError(f"--executor {engine} needs {package}: pip install 'torch-layerscale[{extra}]'") from None
    return module


def make_pool(options: ExecutorOptions, study_dir: Path, *, jobs: int, threads: int, progress: bool = True,
              log=print, start_by: float | None = None):
    """``pool(runs, desc)``: run the pending runs of ``runs`` on ``options.engine``; returns their failures.
    ``start_by``: the end of the local pool's start window (:mod:`layerscale.study.run.executor`); the cluster engines
    submit every run at once, so a window is refused there (``ValueError``)."""
    if start_by is not None and options.engine != "local":  # refused before the engine's extra is imported
        raise ValueError(f"--start-window applies to the local executor (it stops starting runs on this machine); "
                         f"--executor {options.engine} submits every run at once: use the cluster's own time limit")
    module = load_engine(options.engine)
    study_dir = Path(study_dir)

    if options.engine == "local":
        def pool(runs, desc):
            return module.run_pool(runs, study_dir, jobs=jobs, threads=threads, progress=progress, desc=desc,
                                   log=log, start_by=start_by)
    elif options.engine == "submitit":
        def pool(runs, desc):
            return module.run_submitit_pool(runs, study_dir, options, threads=threads, progress=progress,
                                            desc=desc, log=log)
    else:
        def pool(runs, desc):
            return module.run_ray_pool(runs, study_dir, options, threads=threads, progress=progress, desc=desc,
                                       log=log)
    return pool
