"""Checks that an output path can be written, made before any work, so a bad ``--out`` / ``DST`` costs one line.

Whether a folder accepts new files is only known by trying (permissions, read-only or pseudo file systems such as
``/proc`` and ``/sys``, immutable folders, quotas), so the check creates and removes an empty temporary file in the
folder that would receive the output: the nearest existing folder for a path whose parents are still to be made.
Nothing else is created. Failures raise one ``ValueError`` naming the path and the reason.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .messages import shown_name
from .paths import describe_non_file

__all__ = ["check_writable_file", "check_writable_dir"]


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _probe(folder: Path, target: Path, what: str) -> None:
    """Create and remove an empty file in ``folder``; ``ValueError`` naming ``target`` if that fails."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".layerscale-write-check-", dir=folder)
    except OSError as exc:
        raise ValueError(f"cannot write {what} {target}: folder {folder} does not accept new files "
                         f"({_reason(exc)})") from None
    os.close(fd)
    os.unlink(tmp)


def _nearest_existing(path: Path, what: str) -> Path:
    """The nearest existing ancestor of ``path`` (``path`` itself included); it must be a folder."""
    current = path
    while not os.path.lexists(current):
        if current.parent == current:
            break
        current = current.parent
    if current == path and not current.is_dir():  # the path itself is there, and is no folder
        kind = describe_non_file(path) or ("a file" if path.exists() else "a symbolic link to nothing")
        raise ValueError(f"{shown_name(path)}: is {kind}, not a folder; expected a {what}")
    if not current.is_dir():
        raise ValueError(f"cannot write {what} {path}: {current} is a file, not a folder")
    return current


def check_writable_file(path: str | os.PathLike, what: str = "output file") -> Path:
    """Raise ``ValueError`` unless a file can be created at ``path``: its folder exists and accepts new files,
    and ``path`` is not a folder. Returns ``Path(path)``."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"cannot write {what} {path}: it is a folder, expected a file path")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        existing = _nearest_existing(parent, what)
        raise ValueError(f"cannot write {what} {path}: folder {parent} does not exist (nearest existing: "
                         f"{existing})")
    if not parent.is_dir():
        raise ValueError(f"cannot write {what} {path}: {parent} is a file, not a folder")
    _probe(parent, path, what)
    return path


def check_writable_dir(path: str | os.PathLike, what: str = "run directory") -> Path:
    """Raise ``ValueError`` unless ``path`` is, or can be made, a folder that accepts new files: every existing
    part of it is a folder and the deepest existing one accepts files. Returns ``Path(path)``. A ``path`` that is
    there but no folder is named as what it is (``out: is a file, not a folder; expected a run directory``)."""
    path = Path(path)
    existing = _nearest_existing(path, what)
    _probe(existing, path, what)
    return path
