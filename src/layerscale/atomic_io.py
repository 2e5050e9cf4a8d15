"""Atomic file writes: a file on disk is either its old version or the complete new one, never half-written.

Every writer goes through :func:`atomic_path`: the content is written to a temporary file in the destination's
folder, flushed to disk (``fsync``), given the permissions a plain ``open`` would (``mkstemp`` makes 0600 files),
and renamed over the destination with ``os.replace``; on any error the temporary file is removed and the
destination is untouched.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "write_bytes_atomic", "write_text_atomic", "write_json_atomic"]


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for a writer that takes a file name; on success it replaces
    ``path``. ``path``'s folder must exist."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``Path(path)``. A failed write (a full disk) is an ``OSError``
    naming ``path``, which is untouched."""
    with atomic_path(path) as tmp:
        try:
            tmp.write_bytes(data)
        except OSError as exc:
            if exc.filename is not None:
                raise
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    return Path(path)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``Path(path)``."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as indented JSON (and a final newline) to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(data, indent=2) + "\n")
