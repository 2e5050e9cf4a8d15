"""Undoing the start of a new run whose first training step meets bad input: what that start made is removed.

A new run writes its directory (``.lock``, ``config.yaml``, ``metrics.jsonl``, ``tensorboard/``) before it trains.
Bad input that only a training step meets (a token id past the model's embedding, a batch the model does not take)
then raises in step 1, leaving a folder a retry with the same ``--out`` / ``out=`` was refused on ("already exists
and is not empty"). Nothing in it is worth keeping: no step was taken and no checkpoint written.

So a :class:`FailedStart` is taken before the run directory is made, and :meth:`FailedStart.undo` removes, after
such a failure, exactly what this start made: the entries of the run directory that were not there before (an
empty run directory's ``.lock`` stays), then the folders it created (the run directory and any parents ``mkdir``
made), deepest first, each only when empty. A resumed run, a restarted one, and a run that took a step or wrote a
checkpoint are never undone (:func:`~layerscale.train.run_core.train_built_model` decides).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["BAD_INPUT_ERRORS", "FailedStart"]

#: errors of a first step that mean bad input (a run stopped on a non-finite loss is not one: it keeps its record)
BAD_INPUT_ERRORS = (ValueError, TypeError, IndexError)


class FailedStart:
    """What exists of ``run_dir`` now, before a new run makes it: the folders still to be made, and the entries it
    already holds."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.run_dir = Path(run_dir)
        self.made: list[Path] = []  # folders that do not exist yet, deepest first
        current = self.run_dir
        while not os.path.lexists(current) and current.parent != current:
            self.made.append(current)
            current = current.parent
        self.before = {entry.name for entry in self.run_dir.iterdir()} if self.run_dir.is_dir() else set()

    def undo(self) -> None:
        """Remove what was made since (see the module docstring); an entry that cannot be removed is left."""
        if self.run_dir.is_dir() and not self.run_dir.is_symlink():
            for entry in self.run_dir.iterdir():
                if entry.name in self.before:
                    continue
                try:
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
                except OSError:
                    pass
        for folder in self.made:
            try:
                folder.rmdir()  # only an empty folder
            except OSError:
                return
