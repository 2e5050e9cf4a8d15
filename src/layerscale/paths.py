"""What a path from the command line is, told in one line before it is opened.

``open()`` on a path that is not a regular file does not fail the way a user expects: a FIFO blocks (or reads as
empty), ``/proc/self/mem`` fails with ``EIO`` on the first read, a directory fails with ``IsADirectoryError`` (which
a ``not path.is_file()`` test reports as "not found"), and a component longer than the file system's limit fails
with ``ENAMETOOLONG`` wherever it is first touched. :func:`describe_non_file` names what the path is instead,
:func:`refuse_non_file` is the one-line refusal a reader raises with it, and :func:`os_error_line` turns any
``OSError`` that still escapes into the one line the command prints.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .messages import shown_name

__all__ = ["describe_non_file", "os_error_line", "refuse_non_file"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def describe_non_file(path: str | os.PathLike) -> str | None:
    """``None`` for a regular file (links followed) or a path that does not exist; otherwise what it is (``"a
    directory"``, ``"a FIFO (named pipe)"``, ``"a character device"``, ``"a block device"``, ``"a socket"``, ``"a
    file of the /proc or /sys pseudo file system"``). A path the system cannot even look up (a component longer than
    the file system allows, a loop of links, a component that is a file) is a one-line ``ValueError``."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(os_error_line(exc, path)) from None
    for test, kind in _KINDS:
        if test(mode):
            return kind
    resolved = Path(os.path.realpath(path))
    if resolved.parts[1:2] in (("proc",), ("sys",)):
        return "a file of the /proc or /sys pseudo file system"
    return None


def refuse_non_file(path: str | os.PathLike, expected: str) -> None:
    """A one-line ``ValueError`` ``"PATH: is KIND; expected EXPECTED"`` when ``path`` is there but is no regular file
    (:func:`describe_non_file`: a directory, a FIFO, a device, a /proc file); nothing when it is a regular file or
    nothing is there, so that the caller's own "missing" check comes next. The path is only looked at (``stat``),
    never opened: opening a FIFO would block."""
    kind = describe_non_file(path)
    if kind is not None:
        raise ValueError(f"{shown_name(os.fsdecode(path))}: is {kind}; expected {expected}")


def os_error_line(exc: OSError, path: str | os.PathLike | None = None) -> str:
    """One line for ``exc``: the path (``exc.filename``, else ``path``), escaped and capped, and the system's reason;
    a component too long for the file system also says how long it is."""
    where = exc.filename if exc.filename is not None else path
    reason = exc.strerror or type(exc).__name__
    if exc.errno == errno.ENAMETOOLONG and where is not None:
        longest = max((len(os.fsencode(part)) for part in Path(os.fsdecode(where)).parts), default=0)
        reason += f" (a path component of {longest} bytes; the file system allows at most 255)"
    return f"{shown_name(os.fsdecode(where)) + ': ' if where is not None else ''}{reason}"
