"""What a cluster engine does when one of its runs ends: decide success from the run directory, report it.

The rule is the local pool's (:func:`layerscale.study.run.executor.run_pool`): a run succeeded when its worker
exited 0 *and* left a ``study_status.json`` (``finished``, ``paused`` or ``diverged`` — divergence is a result);
anything else is a :class:`~layerscale.study.run.executor.RunFailure` carrying its log path and the log's last line,
and the other runs go on.
"""

from __future__ import annotations

from pathlib import Path

from ..run_failure import RunFailure, last_line
from ...design.grid import RunSpec
from ..worker import read_status

__all__ = ["PoolTracker", "last_line", "run_weight"]


def run_weight(run: RunSpec) -> float:
    """Blocks × width²: a run's work relative to the other runs of its batch (a tuning rung, the final runs), which
    share one step count; a transformer step's matrix products grow with both. The progress bar advances by it, so
    its remaining time counts a depth-96 run as the longer one it is, not as one run among equals."""
    width = (run.config.get("model") or {}).get("embed_dim")
    usable = isinstance(width, (int, float)) and not isinstance(width, bool) and width > 0
    return float(run.depth) * (float(width) ** 2 if usable else 1.0)


class PoolTracker:
    """Progress of one batch of runs (a tuning rung, the final runs) and the failures among them: ``runs`` the
    batch, ``pending`` those still to train."""

    def __init__(self, runs: list[RunSpec], pending: list[RunSpec], desc: str, progress: bool, log) -> None:
        self.total, self.done, self.desc, self.log = len(runs), len(runs) - len(pending), desc, log
        self.failures: list[RunFailure] = []
        self._bar = None
        if progress:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            waiting = {(r.run_id, r.kind) for r in pending}
            self._bar = tqdm(total=sum(map(run_weight, runs)), desc=desc, dynamic_ncols=True,
                             initial=sum(run_weight(r) for r in runs if (r.run_id, r.kind) not in waiting),
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]")
            self._bar.set_postfix_str(self._count())

    def _count(self) -> str:
        return f"{self.done}/{self.total} runs"

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
            self._bar.set_postfix_str(f"{self._count()}, {text}", refresh=False)
            self._bar.update(run_weight(run))
        else:
            self.log(f"[{self.done}/{self.total}] {text}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
