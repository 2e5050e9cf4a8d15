"""Training checkpoints: one directory per step, written whole or not at all.

Layout: ``RUN_DIR/checkpoints/step_00000120/`` holding ``model.safetensors`` (the weights, full state dict) and
``train_state.pt`` (optimizer, scheduler, RNG states, step / epoch / position in the epoch, the model name), a file
of tensors, dicts, lists, numbers and strings only, so it is read with ``torch.load(weights_only=True)`` and never
unpickles code. The directory is first written as ``checkpoints/.tmp-step_00000120-<pid>/`` and then renamed into
place, so a crash at any moment leaves only complete checkpoints; after each save only the last ``keep`` remain.
Weights are checked finite before anything is written: a checkpoint never holds non-finite weights.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ...atomic_io import atomic_path
from ...checkpoint_io import os_error_of, read_state_dict_file, save_safetensors_atomic
from ...messages import shown_name
from ...paths import refuse_non_file
from ...weight_checks import first_nonfinite, foreign_dtypes
from .train_state import check_train_state

__all__ = [
    "CHECKPOINT_DIR",
    "MODEL_FILE",
    "STATE_FILE",
    "STATE_FORMAT",
    "check_same_architecture",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "remove_stale_temporaries",
    "save_checkpoint",
]

CHECKPOINT_DIR = "checkpoints"
MODEL_FILE = "model.safetensors"
STATE_FILE = "train_state.pt"
STATE_FORMAT = "layerscale.train_state"
STATE_VERSION = 1
_NAME_RE = re.compile(r"^step_(\d+)$")
_TMP_PREFIX = ".tmp-"


def checkpoint_name(step: int) -> str:
    return f"step_{step:08d}"


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """The complete checkpoint directories of a run, oldest step first."""
    root = Path(run_dir) / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _NAME_RE.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def remove_stale_temporaries(run_dir: str | os.PathLike) -> None:
    """Delete half-written checkpoint directories left by a killed process (they were never renamed into place)."""
    root = Path(run_dir) / CHECKPOINT_DIR
    if root.is_dir():
        for path in root.iterdir():
            if path.name.startswith(_TMP_PREFIX) and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)


def _save_torch_atomic(obj: Any, path: Path) -> None:
    """``torch.save`` through a Python file, so that a failed write is the system's ``OSError`` (``ENOSPC`` on a full
    disk) and not torch's ``RuntimeError`` chained to a second one from closing the half-written archive."""
    with atomic_path(path) as tmp:
        try:
            with open(tmp, "wb") as fh:
                torch.save(obj, fh)
        except RuntimeError as exc:
            error = os_error_of(exc)
            if error is None:
                raise
            raise OSError(error, os.strerror(error), str(path)) from None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


def save_checkpoint(run_dir: str | os.PathLike, step: int, model_state: Mapping[str, torch.Tensor],
                    train_state: dict[str, Any], keep: int) -> Path:
    """Write checkpoint ``step`` of ``run_dir`` and prune to the last ``keep``; return its directory.

    Raises ``FloatingPointError`` naming the tensor, before writing anything, if a weight is not finite. A
    checkpoint of the same step already present (a run resumed from an older one) is replaced whole.
    """
    bad = first_nonfinite(model_state.items())
    if bad is not None:
        raise FloatingPointError(f"refusing to checkpoint step {step}: weight {bad[0]!r} is not finite")
    root = Path(run_dir) / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{final.name}-", dir=root))
    try:
        save_safetensors_atomic(model_state, tmp / MODEL_FILE, metadata={"step": str(step)})
        state = {"format": STATE_FORMAT, "version": STATE_VERSION, **train_state}
        _save_torch_atomic(state, tmp / STATE_FILE)
        _fsync_dir(tmp)
        if final.exists():
            old = root / f"{_TMP_PREFIX}old-{final.name}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        _fsync_dir(root)
    except OSError as exc:  # a full disk, a quota: one line; the earlier checkpoints are complete and kept
        shutil.rmtree(tmp, ignore_errors=True)
        reason = (f"{exc.strerror or exc}; checkpoint of step {step} not written, the earlier checkpoints are "
                  f"intact (resume with layerscale train --resume {shown_name(str(run_dir))} once there is room)")
        raise OSError(exc.errno, reason, str(final)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for stale in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(stale, ignore_errors=True)
    return final


def load_checkpoint(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(model_state, train_state)`` of a checkpoint directory, read safely.

    Raises ``FileNotFoundError`` for a missing directory or file, a one-line ``ValueError`` for a file that is not a
    regular file (a FIFO, a folder: named as what it is, and never opened) and for a truncated,
    corrupt or foreign file (anything not written by :func:`save_checkpoint`), or a training state with a field
    of the wrong type or range (:func:`~layerscale.train.state.train_state.check_train_state`).
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: checkpoint directory not found")
    model_path, state_path = path / MODEL_FILE, path / STATE_FILE
    for needed in (model_path, state_path):
        refuse_non_file(needed, "a checkpoint file written by layerscale train")  # a FIFO is named, never opened
        if not needed.is_file():
            raise FileNotFoundError(f"{needed}: checkpoint file missing")
    loaded = read_state_dict_file(model_path)
    if loaded.file_format != "safetensors":
        raise ValueError(f"{model_path}: expected a safetensors file, found a {loaded.file_format} file")
    with state_path.open("rb") as fh:
        if fh.read(4) != b"PK\x03\x04":  # torch.save writes a zip archive
            raise ValueError(f"{state_path}: not a training state written by layerscale train (not a PyTorch "
                             "zip archive)")
    try:
        with warnings.catch_warnings():  # torch's pickle-protocol warning would add lines to a one-line refusal
            warnings.simplefilter("ignore")
            state = torch.load(state_path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(f"{state_path}: holds objects other than tensors and plain containers; refusing to "
                         "unpickle it (not a training state written by layerscale train)") from None
    except Exception as exc:  # noqa: BLE001 — a corrupt stream fails anywhere in the (code-free) unpickler
        message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ValueError(f"{state_path}: truncated or corrupt training state ({message})") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"{state_path}: not a training state written by layerscale train (no format "
                         f"{STATE_FORMAT!r})")
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"{state_path}: training-state version {state.get('version')!r}, this version of "
                         f"layerscale reads version {STATE_VERSION}")
    check_train_state(str(state_path), state)
    return loaded.tensors, state


def check_same_architecture(checkpoint: Path, saved: Mapping[str, torch.Tensor],
                            expected: Mapping[str, torch.Tensor]) -> None:
    """``ValueError`` naming the first differences if the checkpoint's weights do not fit the configured model: keys
    missing or unexpected, a tensor of another shape, or of another dtype unless both are float16 / bfloat16 /
    float32 / float64 (loading casts between those; a float8 or integer tensor where the model has a float, or the
    reverse, is a foreign file, not weights of this model)."""
    missing = [shown_name(k) for k in sorted(set(expected) - set(saved))]
    unexpected = [shown_name(k) for k in sorted(set(saved) - set(expected), key=str)]
    mismatched = [f"{shown_name(k)} {tuple(saved[k].shape)} vs {tuple(expected[k].shape)}"
                  for k in expected if k in saved and saved[k].shape != expected[k].shape]
    other_dtype = foreign_dtypes(saved, expected)
    if missing or unexpected or mismatched or other_dtype:
        parts = []
        for label, items in (("missing", missing), ("unexpected", unexpected), ("shape (checkpoint vs model)",
                             mismatched), ("dtype (checkpoint vs model)", other_dtype)):
            if items:
                parts.append(f"{label} [{', '.join(items[:3])}]{' ...' if len(items) > 3 else ''}")
        raise ValueError(f"{checkpoint}: checkpoint of another architecture than the configured model: "
                         f"{'; '.join(parts)}")
