"""Read a run directory (``config.yaml``, ``metrics.jsonl``, ``checkpoints/``, ``summary.json``) for the report.

A run still in progress, or killed, is read as far as it goes: a last ``metrics.jsonl`` line cut short is skipped
and noted, and a run without ``summary.json`` (written by the trainer at the very end) is marked in progress,
with its latest checkpoint if any. A directory that is not a run at all raises ``FileNotFoundError`` naming the
missing file.

A run directory may be someone else's: ``config.yaml`` and ``metrics.jsonl`` are read as hostile files
(:func:`layerscale.untrusted_files.read_text_file`: no link followed, no FIFO or device opened, the size bounded,
UTF-8), each ``metrics.jsonl`` line is parsed by :func:`layerscale.untrusted_files.parse_json` (bounded nesting, no
``RecursionError``), and each refusal is one line naming the file (and the line) and what was expected.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..messages import shown_name
from ..paths import describe_non_file, refuse_non_file
from ..untrusted_files import NotJSONError, parse_json, read_text_file
from .alerts import WARNING_SPLIT
from .monitor import RECORD_SPLIT
from .records import diagnostics_record_problem, restore_numbers

__all__ = ["RunData", "read_run", "CONFIG_FILE", "METRICS_FILE", "SUMMARY_FILE"]

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
#: what each file read must be, for the line that refuses it
_EXPECTED = {CONFIG_FILE: "the YAML config layerscale train writes",
             METRICS_FILE: "the JSON lines (one record a line) layerscale train writes"}
_CHECKPOINT_RE = re.compile(r"^step_(\d+)$")


@dataclass
class RunData:
    """One run's records, split by kind, with what the report shows about it.

    ``label`` is the legend entry (``name — method, depth D``); ``complete`` says whether the run finished;
    ``notes`` lists what is missing or partial. Build one from records directly (no files) with
    :meth:`from_records`.
    """

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    train: list[dict] = field(default_factory=list)
    eval: list[dict] = field(default_factory=list)
    diagnostics: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    path: Path | None = None

    @classmethod
    def from_records(cls, name: str, records: Sequence[dict], config: dict[str, Any] | None = None,
                     complete: bool = True) -> RunData:
        """Split ``records`` (``metrics.jsonl`` lines as dicts) by their ``split``; a one-line ``ValueError`` for a
        diagnostics record of the wrong shape (:func:`~layerscale.diagnostics.records.diagnostics_record_problem`)."""
        run = cls(name=name, config=dict(config or {}), complete=complete)
        buckets = {"train": run.train, "eval": run.eval, RECORD_SPLIT: run.diagnostics, WARNING_SPLIT: run.warnings}
        for record in records:
            bucket = buckets.get(record.get("split"))
            if bucket is not None and isinstance(record.get("step"), int):
                bucket.append(restore_numbers(record))
        run.diagnostics = [r for r in run.diagnostics if r.get("blocks") != []]  # nothing monitored that step
        for record in run.diagnostics:  # the report indexes them by block: a wrong shape is refused, not plotted
            problem = diagnostics_record_problem(record, len(run.diagnostics[0].get("blocks") or ()) or None)
            if problem is not None:
                raise ValueError(f"{shown_name(name)}: the diagnostics record of step {record['step']} is malformed: "
                                 f"{problem}")
        return run

    @property
    def model(self) -> dict[str, Any]:
        model = self.config.get("model")
        return model if isinstance(model, dict) else {}

    @property
    def method(self) -> str:
        """The residual method from the config (the model's default when the config leaves it out)."""
        return str(self.model.get("residual") or _model_default(self.model.get("name"), "residual") or "?")

    @property
    def depth(self) -> int | None:
        """The configured depth, else the model's default, else the number of monitored blocks."""
        depth = self.model.get("depth") or _model_default(self.model.get("name"), "depth")
        if isinstance(depth, int):
            return depth
        return len(self.diagnostics[0]["blocks"]) if self.diagnostics else None

    @property
    def new_blocks(self) -> list[int]:
        """The blocks (1 = nearest the input) that the records mark new: inserted by ``layerscale grow`` into the
        model this run trained (``run.init_from``); ``[]`` for a model that was not grown."""
        first = self.diagnostics[0]["blocks"] if self.diagnostics else []
        return [i for i, block in enumerate(first, start=1) if block.get("new") is True]

    @property
    def label(self) -> str:
        depth = self.depth
        return f"{self.name} — {self.method}, depth {depth if depth is not None else '?'}"

    @property
    def last_step(self) -> int | None:
        steps = [r["step"] for r in (*self.train, *self.eval, *self.diagnostics)]
        return max(steps) if steps else None


def _model_default(name: Any, key: str) -> Any:
    if not isinstance(name, str):
        return None
    try:
        from ..models.registry import model_defaults  # lazy: only for labels of runs that omit the key

        return model_defaults(name).get(key)
    except (ValueError, ImportError):
        return None


def _read_config(path: Path) -> dict[str, Any]:
    from ..train.config.config_file import MAX_CONFIG_BYTES, parse_config_text

    config = parse_config_text(read_text_file(path, MAX_CONFIG_BYTES, _EXPECTED[CONFIG_FILE]), path)
    if not config:  # layerscale train writes every section: an empty file is no run's config
        raise ValueError(f"{shown_name(path)}: holds no section; expected {_EXPECTED[CONFIG_FILE]}")
    return config


def _read_metrics(path: Path) -> tuple[list[dict], list[str]]:
    """The JSON objects of ``metrics.jsonl`` (other JSON values passed over) and the notes on lines skipped: a line
    that is not JSON text (a last one cut short by a killed writer, a damaged one) is skipped and noted; a line that
    is JSON Python's reader cannot hold (nested past :data:`~layerscale.untrusted_files.MAX_JSON_DEPTH` levels, or
    an integer past the int-string limit) is no damage a writer leaves: one-line ``ValueError`` naming the file and
    the line (:func:`~layerscale.untrusted_files.parse_json`)."""
    from ..train.records.metrics_log import MAX_METRICS_BYTES

    records, notes = [], []
    lines = read_text_file(path, MAX_METRICS_BYTES, _EXPECTED[METRICS_FILE]).splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:  # NaN kept, as the log writes it; any top-level value, as before (what is no object is passed over)
            record = parse_json(line, f"{path}: line {number}", expected=object, finite=False)
        except NotJSONError:
            where = "last line" if number == len(lines) else f"line {number}"
            notes.append(f"{METRICS_FILE}: {where} is incomplete or damaged and was skipped")
            continue
        if isinstance(record, dict):
            records.append(record)
    return records, notes


def read_run(run_dir: str | Path, name: str | None = None) -> RunData:
    """Read ``run_dir``. Raises ``FileNotFoundError`` naming the directory, ``config.yaml`` or ``metrics.jsonl``
    when missing, a one-line ``ValueError`` naming the file when one is no regular file (a FIFO, a folder, a link),
    too large or not UTF-8 text, or for a ``metrics.jsonl`` line nested too deep or holding a too-long integer
    (file and line named); a partial run (no ``summary.json`` yet, a cut last line) is read as far as it goes."""
    path = Path(run_dir)
    if not path.is_dir():
        kind = describe_non_file(path) or ("a file" if path.exists() else None)
        if kind is not None:
            raise ValueError(f"{path}: is {kind}; expected a run directory (written by layerscale train)")
        raise FileNotFoundError(f"{path}: run directory not found")
    for required in (CONFIG_FILE, METRICS_FILE):
        refuse_non_file(path / required, _EXPECTED[required])  # a FIFO or a folder there is named, not "missing"
        if not os.path.lexists(path / required):
            raise FileNotFoundError(f"{path / required}: missing; a run directory holds {CONFIG_FILE}, "
                                    f"{METRICS_FILE} and checkpoints/ (written by layerscale train)")
    records, notes = _read_metrics(path / METRICS_FILE)
    run = RunData.from_records(name or path.resolve().name, records, _read_config(path / CONFIG_FILE))
    run.path = path
    run.notes.extend(notes)
    checkpoints = path / "checkpoints"
    if checkpoints.is_dir():
        run.checkpoints = sorted(int(m.group(1)) for p in checkpoints.iterdir()
                                 if p.is_dir() and (m := _CHECKPOINT_RE.match(p.name)))
    run.complete = (path / SUMMARY_FILE).is_file()
    if not run.complete:
        last = run.last_step
        latest = f"latest checkpoint at step {run.checkpoints[-1]}" if run.checkpoints else "no checkpoint yet"
        run.notes.append(f"in progress or stopped early (no {SUMMARY_FILE}): records up to step "
                         f"{last if last is not None else '-'}, {latest}")
    if not run.diagnostics:
        run.notes.append("no diagnostics records (diagnostics were off, or none written yet)")
    return run
