"""The files of a data folder someone else made: every non-hidden regular file under it, recursively, and nothing
a link or a special file could bring in from elsewhere."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..messages import shown_name
from ..paths import describe_non_file
from ..untrusted_files import regular_files

__all__ = ["folder_files"]


def folder_files(folder: Path, what: str) -> list[tuple[str, Path]]:
    """``(relative path, path)`` of every non-hidden regular file under ``folder``, recursively, sorted by relative
    path (stable across filesystems). Hidden entries (a name starting with ``.``: ``.ipynb_checkpoints/``,
    ``.git/``, macOS's ``._x.png``) are passed over with everything under them. A symbolic link or a special file (a
    FIFO, a device, a socket) is refused in one line naming it and ``what`` the folder is (``"text folder"``),
    never followed or opened (:func:`~layerscale.untrusted_files.regular_files`)."""
    found, stack = [], [(folder, "")]
    while stack:
        directory, prefix = stack.pop()
        files, others = regular_files(directory)
        found += [(prefix + name, directory / name) for name in files if not name.startswith(".")]
        for name in others:
            if name.startswith("."):
                continue
            entry = directory / name
            mode = os.lstat(entry).st_mode
            if stat.S_ISDIR(mode):
                stack.append((entry, f"{prefix}{name}/"))
            else:
                kind = "a symbolic link" if stat.S_ISLNK(mode) else describe_non_file(entry) or "no regular file"
                raise ValueError(f"{shown_name(str(entry))}: is {kind} inside the {what} "
                                 f"{shown_name(str(folder))}; expected regular files and folders only")
    return sorted(found)
