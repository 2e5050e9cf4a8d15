"""One live process per run directory: ``RUN_DIR/.lock``, held with ``flock`` by the process that trains the run.

Two processes training one run directory corrupt it (each cuts back the other's ``metrics.jsonl``, replaces its
checkpoints, and a study worker starting afresh deletes the folder under the other). So the process that writes a
run directory first takes an exclusive ``flock`` on its ``.lock`` file, without waiting, and holds it until the run
ends; a second process is refused with one line naming the holder's pid. The kernel releases a ``flock`` when its
holder dies, however it dies (SIGKILL included), so a stale lock never blocks a later resume, and no pid-file guess
is involved. The file itself stays (a later holder reuses it); it is the only entry that does not make a run
directory "not empty" (:func:`is_empty_run_dir`).

Holding is re-entrant within a process (the study worker holds the run directory while it clears it, then the
trainer takes it again). Without ``fcntl`` (Windows) nothing is locked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover — Windows: no advisory locks
    fcntl = None

__all__ = ["LOCK_FILE", "RunDirectoryInUse", "clear_run_dir", "hold_run_dir", "is_empty_run_dir"]

LOCK_FILE = ".lock"

# Locks this process holds: resolved run directory -> [file descriptor, depth].
_HELD: dict[str, list[int]] = {}


class RunDirectoryInUse(FileExistsError):
    """The run directory is held by another live process."""


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "another process"


@contextmanager
def hold_run_dir(run_dir: str | os.PathLike) -> Iterator[Path]:
    """Create ``run_dir`` if needed and hold its lock for the ``with`` block; :class:`RunDirectoryInUse` (one line,
    naming the holder) when another live process holds it."""
    run_dir = Path(run_dir)
    key = str(run_dir.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield run_dir
        finally:
            _HELD[key][1] -= 1
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunDirectoryInUse(
                    f"{run_dir}: in use by {_holder(fd)}, a live process training this run (it holds "
                    f"{run_dir / LOCK_FILE}); wait for it to end or stop it, then resume") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = [fd, 1]
        try:
            yield run_dir
        finally:
            del _HELD[key]
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def is_empty_run_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory holding nothing but (at most) its lock file."""
    path = Path(path)
    return path.is_dir() and all(entry.name == LOCK_FILE for entry in path.iterdir())


def clear_run_dir(run_dir: str | os.PathLike) -> None:
    """Delete everything in ``run_dir`` but its lock file (call it while holding the lock)."""
    import shutil

    for entry in Path(run_dir).iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
