"""Fate-sharing for jobs on the study's own machine: a job whose study process is gone stops its worker.

submitit's local executor starts every job as a controller process that is meant to outlive the Python session
that submitted it, so a killed ``layerscale study`` (SIGKILL, or SIGTERM, which runs no ``finally``) used to leave
its jobs training, and a rerun then started a second worker in every run folder. The study therefore hands each
local job its own :func:`process_identity`; the job (:func:`~.run_task.execute`) starts :func:`stop_when_gone`,
which polls it and stops the worker as soon as the study is gone. The identity is ``host:pid:start-time``
(``/proc/PID/stat`` field 22, clock ticks since boot), so a pid reused by another process never counts as the
study; on a system without ``/proc`` only the pid is compared.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable

__all__ = ["POLL_S", "is_alive", "process_identity", "stop_when_gone"]

#: Seconds between two looks at the study process.
POLL_S = 0.5


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]  # field 22 (the 2 before ")" are pid and name)
    except (OSError, IndexError):
        return "?"


def process_identity(pid: int | None = None) -> str:
    """``host:pid:start-time`` of process ``pid`` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def is_alive(identity: str) -> bool | None:
    """Whether the process of ``identity`` still runs; ``None`` when it ran on another host (cannot tell)."""
    parts = identity.split(":")
    host, pid, start = ":".join(parts[:-2]), int(parts[-2]), parts[-1]
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by someone else: the start time decides
    now = _start_time(pid)
    return now == start or "?" in (now, start)


def stop_when_gone(identity: str, worker: subprocess.Popen, note: Callable[[str], None],
                   poll_s: float = POLL_S) -> threading.Thread:
    """In a daemon thread: once the study of ``identity`` is gone, say so through ``note`` and stop ``worker``
    (SIGTERM, then SIGKILL after 30 s). Ends by itself when the worker ends first. Does nothing for a study on
    another host."""
    def watch() -> None:
        while worker.poll() is None:
            if is_alive(identity) is False:
                note(f"the study process ({identity}) is gone; stopping this run's worker")
                worker.terminate()
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                return
            time.sleep(poll_s)

    thread = threading.Thread(target=watch, name="study-watch", daemon=True)
    thread.start()
    return thread
