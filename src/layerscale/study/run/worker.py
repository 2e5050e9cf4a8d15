"""One study run in its own process, started by :func:`layerscale.study.run.executor.run_pool` through
:data:`BOOTSTRAP`.

Starts the run, or resumes it from its latest checkpoint (with the config's ``run.stop_at_step``, so a paused tuning
run continues to its next rung), and writes ``study_status.json`` in the run directory::

    {"status": "finished" | "paused" | "diverged", "step": int, "total_steps": int, "stop_at_step": int,
     "diverged_step": int | null, "message": str}

**No orphans.** The bootstrap, before anything else is imported (``import torch`` takes seconds), asks Linux to
send the worker SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``) and then checks that the parent is still
the ``layerscale study`` process that started it: a parent that died *before* the ``prctl`` is caught by that check
(the worker has been re-parented), one that dies after it by the signal. On systems without ``prctl`` the worker
also polls its parent at every step. A killed study therefore leaves no worker training, and a rerun never trains
the same run twice at once. Whatever the engine, the worker also holds its run directory's lock
(:mod:`layerscale.train.state.run_lock`) from before it clears a directory that never reached a checkpoint to its end,
so a second worker for the same run — a rerun while an orphan of a killed study still trains — is refused, not run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ...atomic_io import write_json_atomic
from ...untrusted_files import read_json_file

STATUS_FILE = "study_status.json"

#: ``python -c BOOTSTRAP PARENT_PID RUN_DIR CONFIG_JSON THREADS``: parent-death guard first, then the worker.
BOOTSTRAP = """
import os, sys
parent = int(sys.argv[1])
try:
    import ctypes, signal
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    sys.exit(f"study process {parent} is gone before this worker started")
from layerscale.study.run.worker import main
sys.exit(main(sys.argv[1:]))
"""


#: the statuses a worker writes (a run without the file is pending)
STATUSES = ("finished", "paused", "diverged")


def read_status(run_dir: Path) -> dict | None:
    """The run's ``study_status.json``, or ``None`` when there is none. A file that is not a JSON object with a
    known ``status`` (a crafted or damaged record: ``[1]``, ``"x"``, nested, overflowing numbers) is refused with a
    one-line ``ValueError`` naming it, read as a hostile file (:mod:`layerscale.untrusted_files`: no link followed,
    at most 1 MiB)."""
    from ...untrusted_files import UntrustedFileError, parse_json, read_regular_file

    path = run_dir / STATUS_FILE
    if not os.path.lexists(path):
        return None
    try:
        status = parse_json(read_regular_file(path, 1 << 20), str(path))
    except UntrustedFileError as exc:
        raise ValueError(str(exc)) from None
    if status.get("status") not in STATUSES:
        raise ValueError(f"{path}: status {str(status.get('status'))[:40]!r} refused; expected one of "
                         f"{', '.join(STATUSES)}")
    return status


def main(argv: list[str]) -> int:
    import torch

    from ...train.state.run_lock import hold_run_dir

    parent, run_dir, config_path, threads = int(argv[0]), Path(argv[1]), Path(argv[2]), int(argv[3])
    torch.set_num_threads(threads)
    config = read_json_file(config_path, finite=False)  # written by the study: NaN/Infinity kept, as before
    if os.environ.get("RANK", "0") != "0":  # another process of a torchrun run: rank 0 holds the run directory
        return _train(run_dir, config, parent)
    if run_dir.exists() and not run_dir.is_dir():
        raise NotADirectoryError(f"{run_dir}: exists and is not a run directory")
    with hold_run_dir(run_dir):  # a run directory another live worker trains is refused (RunDirectoryInUse)
        return _train(run_dir, config, parent)


def _train(run_dir: Path, config: dict, parent: int) -> int:
    from ...train.callbacks import Callback
    from ...train.state.checkpoint import latest_checkpoint
    from ...train.nonfinite import NonFiniteError
    from ...train.state.run_lock import clear_run_dir
    from ...train.runner import SUMMARY_FILE, run

    class StopWithParent(Callback):
        def on_step_end(self, trainer, step):
            if os.getppid() != parent:
                raise SystemExit(f"study process {parent} is gone; stopping {run_dir.name} at step {step}")

    stop_at = int(config.get("run", {}).get("stop_at_step", 0))
    resume = run_dir.is_dir() and latest_checkpoint(run_dir) is not None
    if run_dir.exists() and not resume and os.environ.get("RANK", "0") == "0":
        clear_run_dir(run_dir)  # a start that never reached its first checkpoint: nothing worth keeping
    (run_dir / STATUS_FILE).unlink(missing_ok=True)  # a paused run being continued is no longer done
    try:
        if resume:
            result = run(resume=run_dir, overrides=[f"run.stop_at_step={stop_at}"], callbacks=[StopWithParent()])
        else:
            result = run(config, callbacks=[StopWithParent()])
    except NonFiniteError as exc:
        step = exc.step
        write_json_atomic(run_dir / STATUS_FILE, {"status": "diverged", "step": step, "total_steps": None,
                                                  "stop_at_step": stop_at, "diverged_step": step,
                                                  "message": str(exc)})
        return 0
    if os.environ.get("RANK", "0") != "0":
        return 0  # one process of a torchrun run (study.executors.ddp_worker): rank 0 writes the summary and status
    summary = read_json_file(run_dir / SUMMARY_FILE, finite=False)  # a run's summary may hold NaN
    total = int(summary["total_steps"])
    done = result.step >= total or summary.get("stopped_early_at") is not None
    write_json_atomic(run_dir / STATUS_FILE, {"status": "finished" if done else "paused", "step": result.step,
                                              "total_steps": total, "stop_at_step": stop_at, "diverged_step": None,
                                              "message": ""})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
