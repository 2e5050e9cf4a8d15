"""A run that failed: it exited non-zero, or without leaving a ``study_status.json`` (divergence is a result, not a
failure). Shared by the local pool (:mod:`.executor`) and the cluster engines' tracker (:mod:`.executors.tracker`),
so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunFailure", "last_line"]


@dataclass(frozen=True)
class RunFailure:
    run_id: str
    exit_code: int | None
    log: Path
    last_line: str

    def __str__(self) -> str:
        return f"{self.run_id} (exit {self.exit_code}): {self.last_line} [log: {self.log}]"


def last_line(path: Path) -> str:
    """The last non-empty line of ``path`` (``(no log)`` / ``(empty log)`` when there is none)."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"
