"""``layerscale study --dry-run``: every run the study would start and what the executor would submit for it,
without submitting or writing anything.

What can be known before any run trains is listed run by run: tuning rung 0 (every learning rate of every cell,
to the first rung's step) and the final runs at the shared rate (or, untuned, every final run). The later rungs
and the final runs at each cell's tuned rate depend on the tuning scores, so they are counted, not listed. Under
``--tuning grid`` the grid extensions that the finished runs already ask for (a cell whose best mean is at an edge
of its rates: :func:`layerscale.study.run.tuning.extension_for_best`) are listed run by run as well.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ..executor import is_done
from ...design.grid import StudySpec, format_lr
from ..tuning import rung_steps
from .options import ExecutorOptions
from .run_task import task_for, worker_command

__all__ = ["describe_plan"]


def _command_text(command: list[str]) -> str:
    if len(command) > 3 and command[1] == "-c":  # the bootstrap is a script; name it instead of printing it
        command = [command[0], "-c", "<layerscale.study.run.worker.BOOTSTRAP>", "<pid of the job or task>",
                   *command[4:]]
    return shlex.join(command).replace("'<", "<").replace(">'", ">")


def _executor_lines(options: ExecutorOptions, study_dir: Path, example, jobs: int, threads: int,
                    batches: int) -> list[str]:
    threads_per_run = options.cpus_per_run or threads
    task = task_for(example, study_dir, threads_per_run, options.gpus_per_run, options.nodes_per_run)
    command = _command_text(worker_command(task, parent_pid=0, master_addr="<first node of the job>",
                                           master_port=0))
    if options.engine == "local":
        return [f"executor local: a process pool on this machine, {jobs} run(s) at once, {threads} thread(s) each; "
                "per run:", f"  {_command_text(worker_command(task_for(example, study_dir, threads), parent_pid=0))}"]
    from . import load_engine

    module = load_engine(options.engine)
    if options.engine == "submitit":
        parameters = module.submission_parameters(options, threads, 0, f"layerscale-{study_dir.name}")
        parameters["slurm_array_parallelism"] = "<runs in the array>"
        cluster = options.submitit_cluster or "automatic (Slurm when sbatch is available, else this machine)"
        return [f"executor submitit (cluster: {cluster}): {batches} job array(s) at most (one per tuning rung, one "
                "for the final runs), one job per pending run, job files under "
                f"{study_dir / 'submitit'}; each job:",
                *(f"  {key} = {value}" for key, value in parameters.items()),
                "  requeued on preemption / time limit (SIGUSR2), resuming from the run's latest checkpoint",
                f"  runs: {command}"]
    request = module.remote_options(options, threads)
    return [f"executor ray ({options.ray_address or 'a new Ray instance on this machine'}): one task per pending "
            "run, each with:", *(f"  {key} = {value}" for key, value in request.items()), f"  runs: {command}"]


def describe_plan(spec: StudySpec, study_dir: Path, total_steps: int, data_description: str,
                  options: ExecutorOptions, *, jobs: int, threads: int, higher_is_better: bool = True) -> str:
    """The dry-run text: the runs known before training, and the executor's submission for each."""
    study_dir = Path(study_dir)
    lines = [f"dry run of the study in {study_dir}: nothing is submitted or written",
             f"data: {data_description}; {total_steps} steps per run at the full budget"]
    listed = []
    rungs = rung_steps(total_steps, len(spec.lrs), spec.min_budget, spec.halving_rate) if spec.tuned else []
    if spec.tuned and spec.tuning == "grid":
        finals = spec.final_runs(study_dir, {cell: spec.shared_lr for cell in spec.cells()},
                                 every_rate={cell: tuple(spec.lrs) for cell in spec.cells()})
        extra = (f" (seeds 0 .. {spec.primary_seeds - 1} in the primary family's cells "
                 f"{', '.join(f'{m}@{d}' for m, d in sorted(spec.primary_cells()))}: --primary-seeds)"
                 if spec.primary_seeds and spec.primary_seeds > len(spec.seeds) else "")
        lines.append(f"rate grid: every rate of every cell x seeds {list(spec.seeds)}{extra} at the full budget: "
                     f"{len(finals)} run(s) (the cell's rate is chosen by their validation scores)")
        lines += [f"  final  {r.run_id:<36} {'done' if is_done(r) else 'to run'}  {r.run_dir}" for r in finals]
        if spec.extend_grid:
            from ..rate_search import search_rates

            lines.append(f"a cell whose best mean is at an edge of its rates adds one more rate outward before the "
                         f"tie rule chooses (at most {spec.extend_grid} time(s)): which cells depends on the scores")
            outcome = search_rates(spec, study_dir, total_steps, higher_is_better, lambda runs, desc: [])
            extension = [spec.run(study_dir, m, d, lr, seed, "final") for (m, d), added in outcome.pending.items()
                         for lr in added for seed in spec.seeds_for(m, d)]
            if extension:
                lines.append("grid extension the finished runs ask for (best mean at an edge): "
                             + "; ".join(f"{m} at depth {d} adds {', '.join(format_lr(lr) for lr in added)}"
                                         for (m, d), added in outcome.pending.items())
                             + f": {len(extension)} run(s)")
                lines += [f"  final  {r.run_id:<36} {'done' if is_done(r) else 'to run'}  {r.run_dir}"
                          for r in extension]
                finals = [*finals, *extension]
        rungs = [total_steps]
    elif rungs:
        tune = [spec.run(study_dir, m, d, lr, seed, "tune", stop_at_step=rungs[0])
                for m, d in spec.cells() for lr in spec.lrs for seed in spec.tuning_seeds]
        lines.append(f"tuning rung 0: {len(tune)} run(s) (every rate of every cell, seeds "
                     f"{list(spec.tuning_seeds)}) to step {rungs[0]} of {total_steps}")
        listed += tune
        lines += [f"  tune   {r.run_id:<36} {'done' if is_done(r) else 'to run'}  {r.run_dir}" for r in tune]
        if len(rungs) > 1:
            lines.append(f"later rungs (to steps {', '.join(map(str, rungs[1:]))}) continue the best 1/"
                         f"{spec.halving_rate} of each cell's rates: which ones depends on the tuning scores")
        shared = ([spec.run(study_dir, m, d, spec.shared_lr, s, "final") for m, d in spec.cells() for s in spec.seeds]
                  if spec.shared_table else [])
        lines.append(f"final runs at the shared rate {format_lr(spec.shared_lr)}: {len(shared)} run(s)")
        lines += [f"  final  {r.run_id:<36} {'done' if is_done(r) else 'to run'}  {r.run_dir}" for r in shared]
        tuned_count = len(spec.cells()) * len(spec.seeds)
        lines.append(f"final runs at each cell's tuned rate: up to {tuned_count} more (seeds {list(spec.seeds)}; "
                     "the rates depend on the tuning; a cell tuned to the shared rate reuses the runs above)")
        finals = shared
    else:
        lr = spec.lrs[0] if spec.lrs else spec.shared_lr
        finals = spec.final_runs(study_dir, {cell: lr for cell in spec.cells()})
        lines.append(f"no tuning (one learning rate); final runs: {len(finals)} run(s)")
        lines += [f"  final  {r.run_id:<36} {'done' if is_done(r) else 'to run'}  {r.run_dir}" for r in finals]
    listed += finals
    done = sum(1 for r in listed if is_done(r))
    if done:
        lines.append(f"{done} of the {len(listed)} listed run(s) are already done; a rerun skips them")
    if listed:
        lines += _executor_lines(options, study_dir, listed[0], jobs, threads, len(rungs) + 1)
    return "\n".join(lines)
