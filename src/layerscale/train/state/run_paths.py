"""Where a run's weights are: a run directory, one of its checkpoints, or a weights file given directly."""

from __future__ import annotations

import os
from pathlib import Path

from .checkpoint import CHECKPOINT_DIR, MODEL_FILE, latest_checkpoint

__all__ = ["weights_file"]


def weights_file(path: str | os.PathLike) -> Path:
    """``path`` itself for a file; ``path/model.safetensors`` for a checkpoint directory; the latest checkpoint's
    ``model.safetensors`` for a run directory (written by ``layerscale train``). Raises ``FileNotFoundError`` for a
    directory that is neither, or a run without a checkpoint."""
    path = Path(path)
    if not path.is_dir():
        return path
    if (path / MODEL_FILE).is_file():
        return path / MODEL_FILE
    if (path / CHECKPOINT_DIR).is_dir():
        latest = latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"{path / CHECKPOINT_DIR}: the run has no checkpoint yet")
        return latest / MODEL_FILE
    raise FileNotFoundError(f"{path}: a directory that is neither a run directory (no {CHECKPOINT_DIR}/) nor a "
                            f"checkpoint (no {MODEL_FILE})")
