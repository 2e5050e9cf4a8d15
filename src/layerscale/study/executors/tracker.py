"""What a cluster engine does when one of its runs ends: decide success from the run directory, report it.

The rule is the local pool's (:func:`layerscale.study.executor.run_pool`): a run succeeded when its worker
exited 0 *and* left a ``study_status.json`` (``finished``, ``paused`` or ``diverged`` — divergence is a result);
anything else is a :class:`~layerscale.study.executor.RunFailure` carrying its log path and the log's last line,
and the other runs go on.
"""

from __future__ import annotations

from pathlib import Path

from ..executor import RunFailure, last_line
from ..grid import RunSpec
from ..worker import read_status

__all__ = ["PoolTracker", "last_line"]


class PoolTracker:
    """Progress of one batch of runs (a tuning rung, the final runs) and the failures among them."""

    def __init__(self, total: int, done: int, desc: str, progress: bool, log) -> None:
        self.total, self.done, self.desc, self.log = total, done, desc, log
        self.failures: list[RunFailure] = []
        self._bar = None
        if progress:
            try:
                from tqdm.auto import tqdm

                self._bar = tqdm(total=total, initial=done, desc=desc, unit="run", dynamic_ncols=True)
            except ImportError:
                self._bar = None

    def finished(self, run: RunSpec, log_path: Path, exit_code: int | None, error: str | None = None) -> None:
        """Record that ``run`` ended with ``exit_code`` (``None``: the engine lost it; ``error`` says why)."""
        status = read_status(run.run_dir)
        if exit_code != 0 or status is None or error is not None:
            reason = error or last_line(log_path)
            self.failures.append(RunFailure(run.run_id, exit_code, log_path, reason))
            text = f"{run.run_id}: FAILED (exit {exit_code}), log {log_path}"
        else:
            text = f"{run.run_id}: {status['status']}"
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix_str(text)
        else:
            self.log(f"[{self.done}/{self.total}] {text}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
