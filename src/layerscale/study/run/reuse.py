"""Reusing finished runs of an earlier study (``--reuse-from``): a redone study starts from every run of the old
one whose recipe is exactly the new design's (same config, seed and data order).

Same recipe is not always the same numbers: on another CPU or math-library build the kernels round differently and
a retrained run drifts from the old record within a few hundred steps (``summary.json``'s ``environment`` records
what a run ran on from 2026-12-01). A reused run is a draw of the same recipe, as a new run would be.

A run is reused only when all of this holds: the new design lists its run id among its final runs (under
``--tuning grid`` every rate it tries; under ``halving``, the shared rate, the only final rate known before tuning);
the old run has ended (``finished`` or ``diverged``); and its saved ``config.yaml``, read back through
:class:`~layerscale.train.config.schema.TrainConfig` (so keys added since take their defaults), equals the new run's
config except for its folder; and its records agree with themselves (below). Nothing in the old study changes.

**The old study is someone else's folder** (a colleague's, a download): it is read through
:mod:`layerscale.untrusted_files`. Only the run's records are copied — the regular files directly in its folder
named in :data:`RECORDS`, each at most :data:`MAX_RECORD_BYTES` — read without following any link and written into
the new run folder from memory; a run folder that is itself a link, or whose record is a link, a FIFO, a device or
too large, is not reused, with one line saying why. Nothing else of the folder (checkpoints, logs, other files)
is copied. **A reused run is re-checked against its own test outcomes**: when it has ``test_outcomes.json``, the
test accuracy (share of correct examples) or loss (mean over windows) those outcomes give must equal the test
record of its ``metrics.jsonl`` and ``summary.json`` (to :data:`OUTCOME_TOLERANCE`); a run whose numbers disagree
with its own outcomes (a forged or damaged record) is not reused, and the line names it. A run without outcomes
(studies before 2026-12-01 kept none) cannot be re-checked this way; the line counts them.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path

from ...atomic_io import write_bytes_atomic
from ...messages import shown_name
from ...paths import describe_non_file
from ...train.records.metrics_log import METRICS_FILE
from ...train.run_core import CONFIG_FILE, SUMMARY_FILE
from ...train.records.test_outcomes import OUTCOMES_FILE, read_test_outcomes
from ...untrusted_files import UntrustedFileError, parse_json, read_regular_file, regular_files
from ..design.grid import RUNS_DIR, RunSpec, StudySpec
from .worker import STATUS_FILE

__all__ = ["reuse_finished_runs", "reusable_runs", "reuse_source_runs", "RECORDS", "MAX_RECORD_BYTES",
           "OUTCOME_TOLERANCE"]

#: the files of a run folder that a study reads, and so the only ones reuse copies
RECORDS = (CONFIG_FILE, METRICS_FILE, STATUS_FILE, SUMMARY_FILE, OUTCOMES_FILE)
#: the largest record copied (a depth-96 language-model run's metrics.jsonl is about 2 MB)
MAX_RECORD_BYTES = 256 * 1024 * 1024
#: test accuracy is a share of examples (exact to float rounding); a test loss is a float32 mean over windows
OUTCOME_TOLERANCE = {"correct": 1e-9, "loss": 1e-4}


class _NotReusable(Exception):
    """Why one old run folder is not reused (one line)."""


def _normalised(config: dict) -> dict:
    from ...train.config.schema import TrainConfig

    raw = TrainConfig.from_dict(config).to_dict()
    raw.get("run", {}).pop("out_dir", None)
    return raw


def _records(old: Path) -> dict[str, bytes]:
    """The run's records, read as hostile files (see the module docstring)."""
    try:
        files, _ = regular_files(old)
        present = {name for name in RECORDS if name in files}
        for name in RECORDS:  # a record that is there but no regular file (a link, a FIFO) is refused by name
            if name not in present and (os.path.lexists(old / name)):
                read_regular_file(old / name, MAX_RECORD_BYTES)
        return {name: read_regular_file(old / name, MAX_RECORD_BYTES) for name in sorted(present)}
    except UntrustedFileError as exc:
        raise _NotReusable(str(exc)) from None


def _saved_config(data: bytes | None, where: Path) -> dict:
    import yaml

    try:
        loaded = yaml.safe_load(data.decode("utf-8")) if data is not None else None
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError):
        loaded = None
    if not isinstance(loaded, dict):
        raise _NotReusable(f"{where / CONFIG_FILE}: missing or not a YAML mapping")
    return loaded


def _test_value(record, key: str) -> float | None:
    value = record.get(key) if isinstance(record, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _check_outcomes(records: dict[str, bytes], where: Path, staged: Path) -> bool:
    """Whether the run's test outcomes exist; ``_NotReusable`` when they disagree with its test records."""
    if OUTCOMES_FILE not in records:
        return False
    try:
        kind, values = read_test_outcomes(staged)
    except ValueError as exc:
        raise _NotReusable(str(exc)) from None
    key = "accuracy" if kind == "correct" else "loss"
    truth = math.fsum(values) / len(values) if values else None
    tests = []
    for line in records.get(METRICS_FILE, b"").splitlines():
        if b'"test"' in line:
            try:
                record = parse_json(line, str(where / METRICS_FILE))
            except UntrustedFileError:
                continue
            if record.get("split") == "test":
                tests.append(("metrics.jsonl", _test_value(record, key)))
    if SUMMARY_FILE in records:
        try:
            summary = parse_json(records[SUMMARY_FILE], str(where / SUMMARY_FILE))
        except UntrustedFileError as exc:
            raise _NotReusable(str(exc)) from None
        tests.append(("summary.json", _test_value(summary.get("test"), key)))
    if truth is None or not tests:
        raise _NotReusable(f"{where}: test outcomes without a test record to check them against")
    for source, value in tests:
        if value is None or abs(value - truth) > OUTCOME_TOLERANCE[kind] * max(1.0, abs(truth)):
            raise _NotReusable(f"{where}: test {key} {value} in its {source} disagrees with its own test outcomes "
                               f"({truth:.6g} over {len(values)} {'examples' if kind == 'correct' else 'windows'})")
    return True


def candidates(spec: StudySpec, study_dir: Path) -> list[RunSpec]:
    """The new design's final runs whose rate is known before any training."""
    shared = {cell: spec.shared_lr for cell in spec.cells()}
    every = {cell: tuple(spec.lrs) for cell in spec.cells()} if spec.tuning == "grid" and spec.tuned else None
    return spec.final_runs(study_dir, shared, every_rate=every)


def reuse_source_runs(source_dir: str | os.PathLike) -> Path:
    """The ``runs/`` folder of ``source_dir``, the earlier study ``--reuse-from`` names; a one-line ``ValueError``
    when ``source_dir`` is missing or no folder, or its ``runs/`` is a link or missing. Only looked at: a run checks
    it before writing anything (and so do ``--dry-run`` and ``--estimate``)."""
    source_dir = Path(source_dir)
    if not source_dir.is_dir():
        found = f"is {describe_non_file(source_dir) or 'a file'}" if source_dir.exists() else "not found"
        raise ValueError(f"--reuse-from {shown_name(source_dir)}: {found}; expected the folder of an earlier study")
    runs = source_dir / RUNS_DIR
    if runs.is_symlink():
        raise ValueError(f"--reuse-from {source_dir}: its {RUNS_DIR}/ is a symbolic link; a study folder from "
                         "elsewhere is read without following links")
    if not runs.is_dir():
        raise ValueError(f"--reuse-from {source_dir}: no {RUNS_DIR}/ folder of finished runs there (a packed study "
                         "must be unpacked first)")
    return runs


def _vetted(spec: StudySpec, study_dir: Path, runs: Path) -> tuple[list[tuple[RunSpec, Path, dict]], list[str],
                                                                     list[str]]:
    """``(ready, differing, refused)``: the candidate runs not yet in ``study_dir`` whose old run ended and whose
    config equals the new one, with their records (``(run, old folder, records)``); the ids whose config differs;
    one line per old run refused as a hostile or damaged folder."""
    ready, differing, refused = [], [], []
    for run in candidates(spec, study_dir):
        old = runs / run.run_dir.name
        if run.run_dir.exists() or not os.path.lexists(old):
            continue
        try:
            records = _records(old)
            status = parse_json(records[STATUS_FILE], str(old / STATUS_FILE)) if STATUS_FILE in records else {}
        except (_NotReusable, UntrustedFileError) as exc:
            refused.append(str(exc))
            continue
        if status.get("status") not in ("finished", "diverged"):
            continue
        try:
            if _normalised(_saved_config(records.get(CONFIG_FILE), old)) != _normalised(run.config):
                differing.append(run.run_id)
                continue
        except _NotReusable:
            differing.append(run.run_id)
            continue
        ready.append((run, old, records))
    return ready, differing, refused


def _write_checked(records: dict[str, bytes], old: Path, folder: Path) -> bool:
    """Write the records into the new, empty ``folder`` and check them against the run's own test outcomes
    (:func:`_check_outcomes`: whether there were outcomes; ``_NotReusable`` when they disagree)."""
    folder.mkdir()
    for name, data in records.items():
        write_bytes_atomic(folder / name, data)
    return _check_outcomes(records, old, folder)


def reusable_runs(spec: StudySpec, study_dir: str | os.PathLike, source_dir: str | os.PathLike) -> list[str]:
    """The ids of the runs :func:`reuse_finished_runs` would copy now, found by the same checks; nothing is written
    outside a temporary folder (``layerscale study --estimate --reuse-from`` counts them as done)."""
    ready, _, _ = _vetted(spec, Path(study_dir), reuse_source_runs(Path(source_dir)))
    ids = []
    with tempfile.TemporaryDirectory(prefix="layerscale-reuse-") as scratch:
        for run, old, records in ready:
            try:
                _write_checked(records, old, Path(scratch) / run.run_id)
                ids.append(run.run_id)
            except _NotReusable:
                pass
    return ids


def reuse_finished_runs(spec: StudySpec, study_dir: Path, source_dir: Path, log=print) -> list[str]:
    """Copy the reusable runs of ``source_dir`` into ``study_dir`` (see the module docstring); returns their ids.
    A run already in ``study_dir`` is left alone. ``ValueError`` when ``source_dir`` is no study folder (or its
    ``runs/`` is a link)."""
    source_dir, study_dir = Path(source_dir), Path(study_dir)
    ready, differing, refused = _vetted(spec, study_dir, reuse_source_runs(source_dir))
    copied, unchecked = [], 0
    for run, old, records in ready:
        run.run_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{run.run_dir.name}.", dir=run.run_dir.parent))
        try:  # a half-copied run folder never appears under its name
            folder = staging / "run"
            unchecked += not _write_checked(records, old, folder)
            os.replace(folder, run.run_dir)
            copied.append(run.run_id)
        except _NotReusable as exc:
            refused.append(str(exc))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    log(f"reused {len(copied)} finished run(s) from {source_dir}"
        + (f" ({unchecked} without test outcomes to re-check them against)" if unchecked else "")
        + (f"; {len(differing)} with the same id were not reused because their config differs: "
           f"{', '.join(differing[:5])}{' …' if len(differing) > 5 else ''}" if differing else ""))
    for reason in refused:
        log(f"not reused: {reason}")
    return copied
