"""Per-example test outcomes of a run, stored compactly so a study can bootstrap over test examples.

When a run evaluates its test split (once, when it ends), it writes ``test_outcomes.json`` beside its metrics:

- classifiers (images): one bit per test example, 1 when the argmax of the logits is the label
  (``"kind": "correct"``), packed eight to a byte, most significant bit first;
- language models: the mean next-token loss (nats) of each test window (``"kind": "loss"``), as 32-bit floats;
  every window has the same length, so the mean over windows is the run's test loss.

The payload is base64 in JSON (no pickle: reading it is safe whatever the file holds), 1.3 KB per 10,000 images.
Only the default objective (cross-entropy over class logits) and one process write it: under DDP each rank sees a
shard of the split and the file is not written (a study runs each run in one process).
"""

from __future__ import annotations

import array
import base64
import math
import sys
from pathlib import Path

import torch

from ...atomic_io import write_json_atomic

__all__ = ["OUTCOMES_FILE", "window_losses", "example_correct", "write_test_outcomes", "read_test_outcomes"]

OUTCOMES_FILE = "test_outcomes.json"
#: the largest outcomes file read (a million loss windows is 5.4 MB of base64)
MAX_OUTCOMES_BYTES = 64 * 1024 * 1024
_FORMAT = 1


def example_correct(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``(B,)`` booleans: whether each example's argmax is its label (logits ``(B, C)``)."""
    return logits.argmax(-1) == labels


def window_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``(B,)`` mean next-token cross-entropy (nats) of each window (logits ``(B, T, V)``, targets ``(B, T)``), over
    the targets that are not ``-100`` (the ignore index the trainer's objective leaves out; a window of padding
    alone has no mean: ``nan``)."""
    losses = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                               reduction="none").reshape(targets.shape)
    kept = targets != -100  # the objective's IGNORE_INDEX (records sit below loop: not imported from it)
    if bool(kept.all()):
        return losses.mean(dim=-1)
    return losses.sum(dim=-1) / kept.sum(dim=-1)


def _pack_bits(bits: torch.Tensor) -> bytes:
    flat = bits.to(torch.uint8).flatten()
    pad = (-len(flat)) % 8
    flat = torch.cat([flat, flat.new_zeros(pad)]).reshape(-1, 8)
    weights = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.int32)
    return bytes((flat.to(torch.int32) * weights).sum(dim=1).tolist())


def _unpack_bits(data: bytes, count: int) -> list[float]:
    out = []
    for byte in data:
        out.extend(float((byte >> shift) & 1) for shift in range(7, -1, -1))
    return out[:count]


def write_test_outcomes(run_dir: str | Path, kind: str, values: torch.Tensor) -> Path:
    """Write ``values`` (booleans for ``kind='correct'``, window losses for ``kind='loss'``) atomically."""
    values = values.detach().cpu().flatten()
    if kind == "correct":
        payload = _pack_bits(values.bool())
    elif kind == "loss":
        payload = array.array("f", values.float().tolist())
        if sys.byteorder != "little":
            payload.byteswap()
        payload = payload.tobytes()
    else:
        raise ValueError(f"test outcome kind must be 'correct' or 'loss', got {kind!r}")
    path = Path(run_dir) / OUTCOMES_FILE
    write_json_atomic(path, {"format": _FORMAT, "kind": kind, "count": len(values),
                             "data": base64.b64encode(payload).decode("ascii")})
    return path


def read_test_outcomes(run_dir: str | Path) -> tuple[str, list[float]] | None:
    """``(kind, values)`` from a run's outcomes file; ``None`` when it has none. A malformed file raises
    ``ValueError`` naming it (a study never bootstraps over half a file). The run may be someone else's: the file is
    read as a hostile one (:func:`~layerscale.untrusted_files.read_json_file`: no link followed, at most
    :data:`MAX_OUTCOMES_BYTES`, nesting bounded)."""
    from ...untrusted_files import UntrustedFileError, read_json_file

    path = Path(run_dir) / OUTCOMES_FILE
    if not path.is_file() and not path.is_symlink():
        return None
    try:
        raw = read_json_file(path, limit=MAX_OUTCOMES_BYTES)
    except UntrustedFileError as exc:  # its message names the file already
        raise ValueError(str(exc)) from None
    try:
        kind, count, data = raw["kind"], int(raw["count"]), base64.b64decode(raw["data"], validate=True)
        if raw.get("format") != _FORMAT or count < 0:
            raise ValueError("unknown format")
        if kind == "correct":
            if len(data) != -(-count // 8):
                raise ValueError(f"{len(data)} bytes for {count} bits")
            return kind, _unpack_bits(data, count)
        if kind == "loss":
            values = array.array("f")
            values.frombytes(data)
            if sys.byteorder != "little":
                values.byteswap()
            if len(values) != count or not all(math.isfinite(v) for v in values):
                raise ValueError(f"{len(values)} finite losses expected {count}")
            return kind, list(values)
        raise ValueError(f"unknown kind {kind!r}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable test outcomes ({exc})") from None
