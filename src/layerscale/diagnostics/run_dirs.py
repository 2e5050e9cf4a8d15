"""Which run directories ``layerscale report`` is given, and what each is called in the report.

* A folder that is not a run directory itself (no ``config.yaml`` / ``metrics.jsonl``) but holds run directories
  one level down — Lightning's ``lightning_logs/`` with its ``version_N`` folders, a ``runs/`` folder — stands for
  those, in name order.
* A run is named by its folder's name; runs whose folder names collide (two Lightning runs are both
  ``version_0``) are named by as many trailing path parts as tell them apart (``a/version_0``, ``b/version_0``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ..messages import shown_name
from .run_data import CONFIG_FILE, METRICS_FILE

__all__ = ["distinct_run_names", "expand_run_dirs"]


def _is_run_dir(path: Path) -> bool:
    return (path / CONFIG_FILE).is_file() or (path / METRICS_FILE).is_file()


def expand_run_dirs(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """``paths`` with each folder of run directories replaced by those run directories (sorted). A path that is
    neither is kept, so that reading it names what is missing. A run directory given twice (``a a``, or ``runs``
    and ``runs/a``) is a one-line ``ValueError`` naming it."""
    out: list[Path] = []
    seen: dict[str, Path] = {}
    for item in paths:
        path = Path(item)
        children = sorted(p for p in path.iterdir() if p.is_dir() and _is_run_dir(p)) \
            if path.is_dir() and not _is_run_dir(path) else []
        for run in children or [path]:
            first = seen.setdefault(os.path.abspath(run), run)
            if first is not run:
                raise ValueError(f"run directory {shown_name(str(first))} is given twice; give each run once")
            out.append(run)
    return out


def distinct_run_names(paths: Sequence[Path]) -> list[str]:
    """One name per path: the folder's name, or, where names collide, the shortest trailing part of the absolute
    path that differs from every other run's (``a/version_0``)."""
    parts = [Path(os.path.abspath(p)).parts for p in paths]
    names = []
    for i, own in enumerate(parts):
        for length in range(1, len(own) + 1):
            name = "/".join(own[-length:])
            if all("/".join(other[-length:]) != name for j, other in enumerate(parts) if j != i):
                break
        names.append(name)
    return names
