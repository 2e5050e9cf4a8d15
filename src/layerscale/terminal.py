"""Whether a command shows a progress bar: only on a terminal.

A progress bar redraws its line with carriage returns (``\\r``); in a log file, a CI job's output or a pipe those
become one long line of every state the bar went through. Commands therefore draw bars only when the stream is a
terminal that reports a width, and every long command has ``--no-progress`` for the terminal case too.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

__all__ = ["is_terminal", "shows_progress"]


def is_terminal(stream: TextIO | Any) -> bool:
    """Whether ``stream`` is a terminal reporting a width of at least one column (a 0 × 0 job console is not)."""
    try:
        return bool(stream.isatty()) and os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, ValueError, OSError):
        return False


def shows_progress(no_progress: bool = False, stream: TextIO | Any | None = None) -> bool:
    """Whether to draw a progress bar on ``stream`` (default ``sys.stderr``, where tqdm draws): not asked to be
    quiet (``--no-progress``) and a terminal."""
    return not no_progress and is_terminal(sys.stderr if stream is None else stream)
