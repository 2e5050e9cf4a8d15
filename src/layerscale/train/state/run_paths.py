"""Where a run's weights are: a run directory, one of its checkpoints, or a weights file given directly.

A run directory may be someone else's: inside it, ``checkpoints/``, a checkpoint directory and its
``model.safetensors`` are refused when they are symbolic links (``layerscale train`` writes none; a link would read
weights from anywhere on the disk under the run's name)."""

from __future__ import annotations

import os
from pathlib import Path

from ...untrusted_files import UntrustedFileError
from .checkpoint import CHECKPOINT_DIR, MODEL_FILE, latest_checkpoint

__all__ = ["weights_file"]


def weights_file(path: str | os.PathLike) -> Path:
    """``path`` itself for a file; ``path/model.safetensors`` for a checkpoint directory; the latest checkpoint's
    ``model.safetensors`` for a run directory (written by ``layerscale train``). Raises ``FileNotFoundError`` for a
    directory that is neither, or a run without a checkpoint, and a one-line ``ValueError`` for a link inside the
    run (module docstring)."""
    path = Path(path)
    if not path.is_dir():
        return path
    if (path / MODEL_FILE).is_file():
        return _not_a_link(path / MODEL_FILE, "checkpoint directory")
    if (path / CHECKPOINT_DIR).is_dir():
        _not_a_link(path / CHECKPOINT_DIR, "run directory")
        latest = latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"{path / CHECKPOINT_DIR}: the run has no checkpoint yet")
        _not_a_link(latest, "run's checkpoints folder")
        return _not_a_link(latest / MODEL_FILE, "checkpoint directory")
    raise FileNotFoundError(f"{path}: a directory that is neither a run directory (no {CHECKPOINT_DIR}/) nor a "
                            f"checkpoint (no {MODEL_FILE})")


def _not_a_link(path: Path, inside: str) -> Path:
    if path.is_symlink():
        raise UntrustedFileError(f"{path}: refused (a symbolic link inside the {inside}); links are not followed")
    return path
