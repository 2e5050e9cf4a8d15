"""What a test folder holds, to check that a refused command left it as it was."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

__all__ = ["snapshot"]


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: a regular file by its SHA-256, anything else (a folder, a FIFO, a link) by its
    kind, never opened or followed."""
    out = {}
    for path in sorted(folder.rglob("*")):
        mode = os.lstat(path).st_mode
        out[str(path.relative_to(folder))] = (hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(mode)
                                              else stat.filemode(mode)[0])
    return out
