"""What a command's output stream can take: a progress bar only on a terminal, and a pipe closed early.

A progress bar redraws its line with carriage returns (``\\r``); in a log file, a CI job's output or a pipe those
become one long line of every state the bar went through. Commands therefore draw bars only when the stream is a
terminal that reports a width, and every long command has ``--no-progress`` for the terminal case too.

``layerscale convert A B | head -3``: the reader leaves after three lines, and the command's next ``print`` meets a
closed pipe. The work the command was asked for (writing ``B``) must not stop there: :func:`pipe_safe` makes
standard output go quietly to ``os.devnull`` from that moment (the way Python's documentation handles SIGPIPE).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

__all__ = ["is_terminal", "pipe_safe", "shows_progress"]


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


class _PipeSafeStream:
    """``stream`` whose writes and flushes, once its reader has closed the pipe, go to ``os.devnull``."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def _silence(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:  # the file descriptor itself: what is still buffered, and the interpreter's last flush, land there too
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def pipe_safe(stream: TextIO | Any) -> TextIO | Any:
    """``stream`` made safe against a reader that closes the pipe early (module docstring); a stream without a file
    descriptor of its own (pytest's capture, a ``StringIO``) is returned as it is."""
    try:
        stream.fileno()
    except (AttributeError, ValueError, OSError):
        return stream
    return stream if isinstance(stream, _PipeSafeStream) else _PipeSafeStream(stream)
