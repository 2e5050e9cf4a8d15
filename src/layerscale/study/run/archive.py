"""A study's run folders packed into one compressed archive, ``runs.tar.xz``, that ``--report-only`` reads directly.

A finished study needs its per-run records (``metrics.jsonl``, ``config.yaml``, ``study_status.json``,
``summary.json``, per-example test outcomes) to rebuild its tables and report, but not as hundreds of loose files
in a repository: ``layerscale study --out DIR --pack`` writes every file under ``DIR/runs/`` into
``DIR/runs.tar.xz`` (stdlib ``tarfile`` + ``lzma``; no new dependency) and leaves ``runs/`` in place; the user
deletes it. The contract:

- **What goes in**: every regular file under ``runs/`` except checkpoints and other weights (a ``checkpoints/``
  or ``tensorboard/`` folder, ``*.safetensors``, ``*.pt``, ``*.ckpt``), temporary files (``*.tmp``) and the run
  lock a live process holds (``.lock``, :mod:`layerscale.train.state.run_lock`), as ``runs/<path>``. The archive is
  deterministic (sorted members, mtime 0, no owner names, fixed modes): packing the same records twice gives the
  same bytes, so a repository holds one version of it, not one per repack.
- **Diagnostics records are compacted** (:func:`layerscale.diagnostics.records.compact_record`): in every
  ``metrics.jsonl`` line whose ``split`` is ``"diagnostics"`` every float is rounded to 4 significant digits
  except ``scale_mean`` (the γ / α heatmaps read it), which is kept exactly. Every other line is copied byte for
  byte. Nothing the tables, figures or report of a study read changes: ``results.md``, ``results.csv``,
  ``runs.csv`` and ``report.html`` rebuilt from the archive equal those rebuilt from the original folder. What
  changes is what ``layerscale diagnostics`` / ``layerscale analyze`` would show of the rounded fields of an
  unpacked run (stream RMS, gradient norm, update ratio, branch ratio, ``scale_max``, per-head scales: 4
  significant digits).
- **Metric logs are stored column-wise** (:mod:`layerscale.study.run.columnar_metrics`): each compacted
  ``metrics.jsonl`` goes into the archive as ``metrics.columns.json`` (one series per block and statistic, which
  compresses better than rows: the language-model study's archive went from 11.6 to 9.5 MB) and is decoded back to
  the same bytes when the archive is read, so every reader of an extracted run reads ``metrics.jsonl`` as before. A
  log with no diagnostics record is stored as it is; archives written before the columnar format (logs as
  ``metrics.jsonl`` members) are read unchanged.
- **Reading**: ``--report-only`` on a folder with the archive and no ``runs/`` extracts the archive into a
  temporary folder with a copy of the study's top-level files, rebuilds there, and only when that succeeded
  copies the files it wrote back (each atomically); the study folder is untouched on any error. A folder with a
  ``runs/`` folder is read from that folder, archive or not. Training (continuing the study) needs the run folders:
  ``--unpack`` restores ``runs/`` from the archive (into a temporary folder, renamed into place when complete).
  A folder with neither, whose ``runs.csv`` lists runs that ran (a replaced study keeps only its tables), is
  refused by every command that would read its records (:func:`refuse_without_records`): the tables stay as they
  are, and the message points at the folder's ``README.md``, which says how to restore the archive.
- **Refused archives**: :mod:`layerscale.study.run.archive_reading` (what a runs archive may hold, checked
  before anything is extracted; nothing is extracted into the study folder when one is refused). The study
  folder's own top-level files are copied for ``--report-only`` only when they are regular files (no link
  followed), each at most 64 MiB (:data:`layerscale.untrusted_files.MAX_RECORD_BYTES`).
"""

from __future__ import annotations

import io
import json
import os
import signal
import tarfile
import threading
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from ...atomic_io import write_bytes_atomic
from ...untrusted_files import MAX_RECORD_BYTES, UntrustedFileError, parse_json, read_regular_file, regular_files
from ...diagnostics.records import COMPACT_DIGITS, compact_record
from ...train.records.metrics_log import METRICS_FILE
from ...train.state.run_lock import LOCK_FILE
from .archive_reading import (MAX_EXPANDED_BYTES, MAX_HEADER_BYTES, MAX_HEADER_CHAIN, MAX_MEMBER_BYTES,
                              MAX_MEMBERS, MAX_XZ_MEMORY, _extract, _members)  # the reading side, re-exported
from .columnar_metrics import COLUMNS_FILE, encode_metrics
from .csv_rows import read_rows
from ..design.grid import RUNS_DIR

__all__ = ["ARCHIVE_FILE", "PackResult", "pack_runs", "unpack_runs", "is_packed", "refuse_packed",
           "refuse_without_records", "report_from_archive", "relocated", "compact_metrics", "MAX_MEMBERS",
           "MAX_MEMBER_BYTES", "MAX_EXPANDED_BYTES", "MAX_HEADER_BYTES", "MAX_HEADER_CHAIN", "MAX_XZ_MEMORY"]

ARCHIVE_FILE = "runs.tar.xz"
_RUNS_TABLE = "runs.csv"  # the run table a study writes beside its records (layerscale.study.report.results)
_SKIPPED_DIRS = frozenset({"checkpoints", "tensorboard"})
_SKIPPED_SUFFIXES = (".tmp", ".safetensors", ".pt", ".ckpt", LOCK_FILE)
_PRESET = 9  # xz's largest dictionary (64 MiB): the runs of one study repeat each other's keys and structure
_DIAGNOSTICS_SPLIT = "diagnostics"

T = TypeVar("T")


@dataclass(frozen=True)
class PackResult:
    archive: Path
    files: int
    raw_bytes: int
    packed_bytes: int

    def __str__(self) -> str:
        return (f"packed {self.files} files ({self.raw_bytes / 1e6:.1f} MB) from {self.archive.parent / RUNS_DIR} "
                f"into {self.archive} ({self.packed_bytes / 1e6:.1f} MB; diagnostics records rounded to "
                f"{COMPACT_DIGITS} significant digits except scale_mean, stored column-wise). {RUNS_DIR}/ is left "
                f"in place: delete it to keep only the archive (--report-only reads the archive when {RUNS_DIR}/ is "
                "absent; --unpack restores it)")


def _archive(study_dir: Path) -> Path:
    return study_dir / ARCHIVE_FILE


def is_packed(study_dir: str | os.PathLike) -> bool:
    """Whether ``study_dir`` holds its runs only as the archive (``runs.tar.xz`` and no ``runs/`` folder)."""
    study_dir = Path(study_dir)
    return _archive(study_dir).is_file() and not (study_dir / RUNS_DIR).exists()


def refuse_packed(study_dir: str | os.PathLike, what: str) -> None:
    """``ValueError`` when ``study_dir`` holds its runs only as the archive: ``what`` (training, estimating) needs
    the run folders, and would otherwise start the study over."""
    if is_packed(study_dir):
        raise ValueError(f"{Path(study_dir) / ARCHIVE_FILE}: the study's runs are packed and {RUNS_DIR}/ is absent; "
                         f"{what} needs the run folders: restore them with layerscale study --out {study_dir} "
                         "--unpack (or rebuild the tables and report from the archive with --report-only)")


def refuse_without_records(study_dir: str | os.PathLike, what: str) -> None:
    """``ValueError`` when ``study_dir`` has neither ``runs/`` nor ``runs.tar.xz`` while its ``runs.csv`` lists runs
    that ran: ``what`` (rebuilding the tables, training on, retraining a run) needs those records, and without them
    would rewrite the committed tables empty (or start the study over). A study whose archive was moved out of the
    working tree (a replaced study) says in its ``README.md`` how to restore it; the message points there."""
    study_dir = Path(study_dir)
    if (study_dir / RUNS_DIR).exists() or _archive(study_dir).is_file():
        return
    ran = sum(row.get("status") not in (None, "", "pending") for row in read_rows(study_dir / _RUNS_TABLE))
    if ran:
        readme = study_dir / "README.md"
        how = f" ({readme} says how)" if readme.is_file() else ""
        raise ValueError(f"{study_dir}: no run records ({RUNS_DIR}/ and {ARCHIVE_FILE} are both absent) while its "
                         f"{_RUNS_TABLE} lists {ran} run(s) that ran; {what} needs their records (without them it "
                         f"would rewrite the tables empty): restore {ARCHIVE_FILE} first{how}")


# ---- packing ------------------------------------------------------------------------------------------------

def compact_metrics(data: bytes) -> bytes:
    """``metrics.jsonl`` content with every diagnostics record compacted (:func:`compact_record`); every other
    line, and a line that is not a JSON object (a last line cut short by a killed run), unchanged."""
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if b'"diagnostics"' not in line:
            continue
        try:  # bounded (a run folder may be someone else's): a line Python's reader cannot hold is kept unchanged
            record = parse_json(line, METRICS_FILE, expected=object, finite=False)
        except UntrustedFileError:
            continue
        if isinstance(record, dict) and record.get("split") == _DIAGNOSTICS_SPLIT:
            lines[i] = json.dumps(compact_record(record)).encode("utf-8")
    return b"\n".join(lines)


def _packed_files(runs: Path) -> list[Path]:
    files = []
    for path in sorted(runs.rglob("*")):
        relative = path.relative_to(runs)
        if any(part in _SKIPPED_DIRS for part in relative.parts[:-1]) or path.name.endswith(_SKIPPED_SUFFIXES):
            continue
        if path.is_file() and not path.is_symlink():
            files.append(path)
    return files


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack_runs(study_dir: str | os.PathLike) -> PackResult:
    """Write ``study_dir/runs.tar.xz`` from ``study_dir/runs/`` (see the module docstring), atomically, after
    reading it back; ``runs/`` is left as it is. ``ValueError`` when there is no ``runs/`` folder or it holds no
    file to pack."""
    study_dir = Path(study_dir)
    runs = study_dir / RUNS_DIR
    if not runs.is_dir():
        raise ValueError(f"--pack: {runs} not found; nothing to pack (a study folder holds its runs in {RUNS_DIR}/)")
    files = _packed_files(runs)
    if not files:
        raise ValueError(f"--pack: {runs} holds no run file to pack")
    buffer = io.BytesIO()
    raw = 0
    names = []
    with tarfile.open(fileobj=buffer, mode="w:xz", format=tarfile.GNU_FORMAT, preset=_PRESET) as tar:
        for path in files:
            data = path.read_bytes()
            raw += len(data)
            name = (PurePosixPath(RUNS_DIR) / path.relative_to(runs).as_posix()).as_posix()
            if path.name == METRICS_FILE:
                data = compact_metrics(data)
                columns = encode_metrics(data)
                if columns is not None:
                    data, name = columns, str(PurePosixPath(name).with_name(COLUMNS_FILE))
            tar.addfile(_member(name, len(data)), io.BytesIO(data))
            names.append(name)
    packed = buffer.getvalue()
    if [m.name for m in _members(io.BytesIO(packed), "the archive just written")] != names:
        raise RuntimeError("--pack: the archive read back does not list the files written into it")
    archive = write_bytes_atomic(_archive(study_dir), packed)
    return PackResult(archive, len(files), raw, len(packed))


@contextmanager
def _cleaned_up_on_sigterm() -> Iterator[None]:
    """SIGTERM (a job scheduler's stop, ``kill``) raised as ``SystemExit(143)`` for the ``with`` block, so the
    temporary folders of :func:`unpack_runs` and :func:`report_from_archive` are removed as on any other error
    (Python's default SIGTERM ends the process without running ``finally``). Outside the main thread, where no
    handler can be installed, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def unpack_runs(study_dir: str | os.PathLike) -> Path:
    """Restore ``study_dir/runs/`` from ``study_dir/runs.tar.xz`` (extracted into a temporary folder beside it,
    renamed into place when complete). ``ValueError`` when there is no archive or ``runs/`` already exists."""
    study_dir = Path(study_dir)
    archive, runs = _archive(study_dir), study_dir / RUNS_DIR
    if not archive.is_file():
        raise ValueError(f"--unpack: {archive} not found; nothing to unpack")
    if runs.exists():
        raise ValueError(f"--unpack: {runs} already exists; move it away first (nothing was overwritten)")
    with _cleaned_up_on_sigterm(), tempfile.TemporaryDirectory(prefix=".unpacking-", dir=study_dir) as tmp:
        _extract(archive, Path(tmp))
        extracted = Path(tmp) / RUNS_DIR
        extracted.mkdir(exist_ok=True)
        os.replace(extracted, runs)
    return runs


@contextmanager
def _extracted_copy(study_dir: Path) -> Iterator[Path]:
    """A temporary study folder: the top-level files of ``study_dir`` (not the archive, no folder) and ``runs/``
    extracted from the archive. Removed on exit."""
    with tempfile.TemporaryDirectory(prefix="layerscale-report-") as tmp:
        copy = Path(tmp) / study_dir.name
        copy.mkdir()
        try:
            names, _ = regular_files(study_dir)  # links, folders and special files are not copied
            for name in names:
                if name != ARCHIVE_FILE:
                    (copy / name).write_bytes(read_regular_file(study_dir / name, MAX_RECORD_BYTES))
        except UntrustedFileError as exc:
            raise ValueError(str(exc)) from None
        _extract(_archive(study_dir), copy)
        yield copy


def _link_on_the_way(study_dir: Path, relative: Path) -> Path | None:
    """The first symbolic link among ``study_dir / relative`` and the folders leading to it (below ``study_dir``),
    or ``None``: a shared study folder may hold a link, and a file written through it lands outside the folder."""
    for count in range(1, len(relative.parts) + 1):
        path = study_dir.joinpath(*relative.parts[:count])
        if path.is_symlink():
            return path
    return None


def _copy_back(written: Path, study_dir: Path) -> None:
    """Every file under ``written`` (not ``runs/``) whose bytes differ from ``study_dir``'s (or that it lacks),
    into ``study_dir``, each atomically. ``ValueError`` naming the link, before any file is written, when a target
    or a folder on its way is a symbolic link (no file is written or compared through a link)."""
    pending = []
    for path in sorted(written.rglob("*")):
        relative = path.relative_to(written)
        if relative.parts[0] == RUNS_DIR or not path.is_file():
            continue
        link = _link_on_the_way(study_dir, relative)
        if link is not None:
            raise ValueError(f"{link}: a symbolic link in the study folder; expected a regular file or folder "
                             f"there to write {relative} (no file is written through a link)")
        data = path.read_bytes()
        target = study_dir / relative
        if target.is_file() and target.read_bytes() == data:
            continue
        pending.append((target, data))
    for target, data in pending:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, data)


def report_from_archive(study_dir: str | os.PathLike, rebuild: Callable[[Path], T]) -> tuple[T, Path]:
    """``rebuild(folder)`` on a temporary copy of the packed study ``study_dir`` (its top-level files and the
    archive's ``runs/``); when it returns, the files it wrote or changed are copied back into ``study_dir``.
    Returns what ``rebuild`` returned and the temporary folder's path as it was (gone by then: map paths in the
    result back with :func:`relocated`). On any error nothing in ``study_dir`` changes."""
    study_dir = Path(study_dir)
    with _cleaned_up_on_sigterm(), _extracted_copy(study_dir) as copy:
        result = rebuild(copy)
        _copy_back(copy, study_dir)
        return result, copy


def relocated(paths: dict[str, Path], copy: Path, study_dir: str | os.PathLike) -> dict[str, Path]:
    """``paths`` under the temporary ``copy`` of :func:`report_from_archive`, as the same paths in ``study_dir``."""
    return {name: Path(study_dir) / Path(path).relative_to(copy) for name, path in paths.items()}
