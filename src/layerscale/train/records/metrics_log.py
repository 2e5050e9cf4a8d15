"""The run's metric stream: ``metrics.jsonl`` (one JSON object per line) and, optionally, TensorBoard.

Every record carries ``step`` and ``split`` (``"train"``, ``"eval"``, or a name a callback chooses, e.g.
``"diagnostics"``); the trainer adds ``epoch`` and ``time`` (seconds since the run first started, carried across
resumes). Lines are flushed as they are written, so a killed run leaves whole lines; on resume the file is cut
back to the records of steps up to the checkpoint's, so that the resumed run's records replace, not repeat, the
ones written after that checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any

from ...atomic_io import write_text_atomic

__all__ = ["MAX_METRICS_BYTES", "METRICS_FILE", "TENSORBOARD_DIR", "MetricsLog", "read_metrics", "truncate_metrics"]

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
#: the largest ``metrics.jsonl`` read (a depth-96 language-model run's is about 2 MB; the study's limit on a record)
MAX_METRICS_BYTES = 256 * 1024 * 1024
#: what the file must be, for the line that refuses it
_EXPECTED = "the JSON lines (one record a line) layerscale train writes"


def _json_value(value: Any) -> Any:
    # JSON has no NaN/Infinity; a diverging run's last loss must still be a valid line.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (none when there is no file), skipping a last line cut short by a
    killed process.

    A log may come from a study folder someone else made, so the file must be a regular file (a link is refused,
    not followed; a FIFO is refused without blocking) of at most :data:`MAX_METRICS_BYTES` in UTF-8, read by
    :func:`layerscale.untrusted_files.read_text_file`, and every line goes through
    :func:`layerscale.untrusted_files.parse_json` (a JSON object nested at most 32 levels; NaN kept, as the log
    writes it) and a record's ``step``, when present, must be a whole number from 0 to 2**53. Any other line than
    a cut last one is refused: ``ValueError`` naming the file, the line and what was expected."""
    from ...untrusted_files import NotJSONError, UntrustedFileError, parse_json, read_text_file

    records = []
    path = Path(path)
    if not os.path.lexists(path):
        return records
    lines = read_text_file(path, MAX_METRICS_BYTES, _EXPECTED).splitlines()
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        try:
            record = parse_json(line.encode("utf-8"), where, finite=False)
        except UntrustedFileError as exc:
            if number == len(lines) and isinstance(exc, NotJSONError):
                continue  # a last line cut short by a killed process
            raise ValueError(str(exc)) from None
        step = record.get("step", 0)
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= 2 ** 53:
            raise ValueError(f"{where}: step {str(step)[:40]!r} refused; expected a whole number from 0 to 2**53")
        records.append(record)
    return records


def truncate_metrics(path: str | os.PathLike, last_step: int) -> None:
    """Rewrite ``path`` (atomically) keeping only records with ``step <= last_step``."""
    path = Path(path)
    if not path.is_file():
        return
    kept = [r for r in read_metrics(path) if isinstance(r.get("step"), int) and r["step"] <= last_step]
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))


class MetricsLog:
    """Appends records to ``run_dir/metrics.jsonl`` and mirrors numeric fields to TensorBoard as
    ``<split>/<field>``. Inactive (every call a no-op) on ranks other than 0."""

    def __init__(self, run_dir: Path, *, active: bool, tensorboard: bool, first_step: int = 0) -> None:
        self.active = active
        self._file = None
        self._writer = None
        if not active:
            return
        self._path = run_dir / METRICS_FILE
        self._file = open(self._path, "a", encoding="utf-8")  # noqa: SIM115 (open for the run; close())
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step drops events a killed run wrote after the checkpoint this run resumes from.
            purge = first_step + 1 if first_step else None
            self._writer = SummaryWriter(str(run_dir / TENSORBOARD_DIR), purge_step=purge)

    def write(self, record: dict[str, Any]) -> None:
        if not self.active:
            return
        try:
            self._file.write(json.dumps({k: _json_value(v) for k, v in record.items()}) + "\n")
            self._file.flush()
        except OSError as exc:  # a full disk: one line naming the file; what was flushed before stays
            file, self._file = self._file, None
            with contextlib.suppress(OSError):  # its buffer cannot be written either
                file.close()
            raise OSError(exc.errno, f"{exc.strerror or exc}; the record of step {record.get('step')} is not "
                                     f"written and the run stopped (resume it once there is room)",
                          str(self._path)) from None
        if self._writer is not None:
            split, step = record.get("split", "train"), record.get("step", 0)
            for key, value in record.items():
                if key not in ("step", "epoch", "split", "time") and isinstance(value, (int, float)) \
                        and not isinstance(value, bool):
                    self._writer.add_scalar(f"{split}/{key}", value, step)

    def add_scalars(self, scalars: dict[str, float], step: int) -> None:
        """Write ``{tag: value}`` to this run's TensorBoard file at ``step`` (no-op without TensorBoard or off rank
        0). Callbacks use it instead of a writer of their own: every writer of a resumed run purges the events
        after the resume step, and a second writer's purge would erase the first one's new points."""
        if self._writer is not None:
            for tag, value in scalars.items():
                self._writer.add_scalar(tag, value, step)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
