"""Retraining a committed study's run from its recorded config (the studies keep no checkpoints).

A study's run folder keeps the run's resolved ``config.yaml``; :func:`retrain_run` trains it again into a new run
directory (only ``run.out_dir`` changes) and :func:`retrained_metric` reads the new run's test metric the way the
study does (:meth:`layerscale.study.report.results.Metric.from_record`), to report beside the committed one
(:func:`committed_metric`, from ``runs.csv``). A retrain is the same recipe, not always the same floating-point
path: on another CPU or library build the kernels round differently and a run drifts from the committed one within
a few hundred steps, ending at a different draw of the same distribution. Callers report both numbers; they never
substitute one for the other.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

__all__ = ["committed_config", "committed_metric", "retrain_run", "retrained_metric", "is_finished", "resumable",
           "has_ended", "train_or_resume", "outcome_text", "training_seconds", "run_outcome", "DIVERGED_FILE"]

DIVERGED_FILE = "diverged.json"  # an evidence run that stopped on a non-finite step: {"message", "step"}


def _run_folder(study_dir: Path, run_id: str) -> Path:
    from .archive import is_packed, refuse_without_records, unpack_runs

    refuse_without_records(study_dir, f"retraining run {run_id!r}")
    folder = study_dir / "runs" / run_id
    if not folder.is_dir() and is_packed(study_dir):
        unpack_runs(study_dir)
    if not (folder / "config.yaml").is_file():
        raise FileNotFoundError(f"{folder / 'config.yaml'}: no recorded config for run {run_id!r} of {study_dir}")
    return folder


def committed_config(study_dir: str | os.PathLike, run_id: str) -> dict:
    """The resolved training config the study recorded for ``run_id`` (unpacking the study's runs if needed)."""
    from ...train.config.config_file import load_config_file

    return load_config_file(_run_folder(Path(study_dir), run_id) / "config.yaml")


def committed_metric(study_dir: str | os.PathLike, run_id: str) -> float | None:
    """The test metric ``runs.csv`` records for ``run_id`` (``None`` when the run has none)."""
    with open(Path(study_dir) / "runs.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["run_id"] == run_id:
                return float(row["test"]) if row["test"] not in ("", None) else None
    raise KeyError(f"run {run_id!r} is not in {Path(study_dir) / 'runs.csv'}")


def is_finished(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` holds a run that ended (its ``summary.json`` is written last, at the end)."""
    return (Path(run_dir) / "summary.json").is_file()


def has_ended(run_dir: str | os.PathLike) -> bool:
    """Whether the evidence run in ``run_dir`` is over: finished (``summary.json``) or diverged (``diverged.json``)."""
    return is_finished(run_dir) or (Path(run_dir) / DIVERGED_FILE).is_file()


def resumable(run_dir: str | os.PathLike, raw: dict) -> bool:
    """Whether ``run_dir`` is an unfinished run of exactly the config ``raw`` (``run.out_dir`` aside) with a
    checkpoint to resume from. The trainer's resume is bitwise — its checkpoint holds the model, optimizer, schedule,
    data position and RNG states, and ``metrics.jsonl`` is cut back to the checkpoint's step — so resuming such a run
    ends where an uninterrupted one would; a folder of any other config is never resumed."""
    from ...train.state.checkpoint import latest_checkpoint
    from ...train.config.schema import TrainConfig

    run_dir = Path(run_dir)
    if is_finished(run_dir) or not (run_dir / "config.yaml").is_file() or latest_checkpoint(run_dir) is None:
        return False
    recorded = TrainConfig.from_file(run_dir / "config.yaml").to_dict()
    wanted = TrainConfig.from_dict(raw).to_dict()
    for tree in (recorded, wanted):
        tree["run"].pop("out_dir", None)
    return recorded == wanted


def train_or_resume(run_dir: str | os.PathLike, raw: dict, *, threads: int = 1) -> str:
    """Bring the evidence run ``run_dir`` of config ``raw`` to its end, on ``threads`` CPU threads, quietly.

    A finished run (``summary.json``) or a diverged one (``diverged.json``) is kept (``"kept"``); an unfinished run
    of exactly ``raw`` with a checkpoint resumes from it (``"resumed"``: :func:`resumable`, bitwise the uninterrupted
    run); anything else in ``run_dir`` is cleared and the run trained from its start (``"trained"``). A run that
    stops on a non-finite step writes ``diverged.json`` (its message and step, atomically) and returns
    ``"diverged"``: divergence is a result, not an error. The run directory's lock
    (:mod:`layerscale.train.state.run_lock`) is held from before anything is cleared to the end, so a run that another
    live process trains raises :class:`~layerscale.train.state.run_lock.RunDirectoryInUse` with nothing touched: several
    processes may work through the same list of runs, each leaving the others' runs to them."""
    import contextlib
    import io

    import torch

    from ...atomic_io import write_json_atomic
    from ...train.nonfinite import NonFiniteError
    from ...train.state.run_lock import clear_run_dir, hold_run_dir
    from ...train.runner import run as train_run

    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        if has_ended(run_dir):
            return "kept"
        resume = resumable(run_dir, raw)
        if not resume:
            clear_run_dir(run_dir)
        torch.set_num_threads(threads)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if resume:
                    train_run(resume=run_dir)
                else:
                    train_run(raw, out=run_dir)
        except NonFiniteError as exc:
            write_json_atomic(run_dir / DIVERGED_FILE, {"message": str(exc), "step": exc.step})
            return "diverged"
    return "resumed" if resume else "trained"


def outcome_text(outcome: str, seconds: float) -> str | None:
    """The progress line's end for a :func:`train_or_resume` outcome that took ``seconds`` (``None`` for
    ``"kept"``: nothing was done)."""
    if outcome == "kept":
        return None
    if outcome == "diverged":
        return "diverged"
    return f"{'resumed and ' if outcome == 'resumed' else ''}trained ({seconds:.0f} s)"


def retrain_run(study_dir: str | os.PathLike, run_id: str, out: str | os.PathLike, *, threads: int = 1,
                quiet: bool = True) -> Path:
    """Train ``run_id`` of the study in ``study_dir`` again, into ``out``, on ``threads`` CPU threads; a finished
    ``out`` is kept as it is, an unfinished one (a process ended mid-run) is removed and trained from the start.
    Returns ``out``."""
    import contextlib
    import io

    import torch

    from ...train.runner import run as train_run

    out = Path(out)
    if is_finished(out):
        return out
    raw = committed_config(study_dir, run_id)
    raw["run"]["out_dir"] = str(out)
    raw["run"]["progress"] = "none"
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(threads)
    sink = io.StringIO() if quiet else None
    with contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext():
        train_run(raw, out=out)
    return out


def retrained_metric(run_dir: str | os.PathLike, classification: bool) -> float | None:
    """The test metric of a finished run directory, as the study computes it (accuracy in %, bits per byte)."""
    from ...train.records.metrics_log import read_metrics
    from ..design.metric import Metric

    metric = Metric.for_language_model(not classification)
    tests = [r for r in read_metrics(Path(run_dir) / "metrics.jsonl") if r.get("split") == "test"]
    return metric.from_record(tests[-1]) if tests else None


def training_seconds(run_dir: str | os.PathLike) -> float | None:
    """Training seconds of a run: the ``time`` of its last training record (``None`` before the first one)."""
    from ...train.records.metrics_log import read_metrics

    path = Path(run_dir) / "metrics.jsonl"
    return _last_training_time(read_metrics(path)) if path.is_file() else None


def _last_training_time(records: list[dict]) -> float | None:
    times = [float(r["time"]) for r in records if r.get("split") == "train" and "time" in r]
    return max(times) if times else None


def run_outcome(run_dir: str | os.PathLike, classification: bool) -> dict:
    """One evidence run's outcome: ``status`` (``finished``: ``summary.json`` written; ``diverged``: the evidence
    runner's ``diverged.json``; else ``pending``), the last validation and test metric as the study computes them
    (only for a finished run), ``steps`` and ``train_s`` (as :func:`training_seconds`, from the records read once)."""
    from ...train.records.metrics_log import read_metrics
    from ...untrusted_files import read_json_file
    from ..design.metric import Metric

    run_dir = Path(run_dir)
    metric = Metric.for_language_model(not classification)
    path = run_dir / "metrics.jsonl"
    records = read_metrics(path) if path.is_file() else []
    last = {split: [r for r in records if r.get("split") == split] for split in ("eval", "test", "train")}
    if is_finished(run_dir):
        status = "finished"
        steps = int(read_json_file(run_dir / "summary.json", finite=False)["step"])  # read as hostile files
    elif (run_dir / DIVERGED_FILE).is_file():
        status = "diverged"
        steps = read_json_file(run_dir / DIVERGED_FILE, finite=False).get("step")
    else:
        status, steps = "pending", None
    if steps is None and last["train"]:
        steps = int(last["train"][-1]["step"])
    finished = status == "finished"
    val = metric.from_record(last["eval"][-1]) if last["eval"] and finished else None
    test = metric.from_record(last["test"][-1]) if last["test"] and finished else None
    return {"status": status, "val": val, "test": test, "steps": steps, "train_s": _last_training_time(records)}
