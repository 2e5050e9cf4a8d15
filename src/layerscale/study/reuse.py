"""Reusing finished runs of an earlier study (``--reuse-from``): a redone study starts from every run of the old
one whose recipe is exactly the new design's (same config, seed and data order).

Same recipe is not always the same numbers: on another CPU or math-library build the kernels round differently and
a retrained run drifts from the old record within a few hundred steps (``summary.json``'s ``environment`` records
what a run ran on from 2026-12-01). A reused run is a draw of the same recipe, as a new run would be.

A run is reused only when all of this holds: the new design lists its run id among its final runs (under
``--tuning grid`` every rate it tries; under ``halving``, the shared rate, the only final rate known before tuning);
the old run has ended (``finished`` or ``diverged``); and its saved ``config.yaml``, read back through
:class:`~layerscale.train.config.TrainConfig` (so keys added since take their defaults), equals the new run's config
except for its folder. The run folder is copied without checkpoints or logs; nothing in the old study changes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .grid import RUNS_DIR, RunSpec, StudySpec
from .worker import read_status

__all__ = ["reuse_finished_runs"]

_SKIPPED = ("checkpoints", "logs")


def _normalised(config: dict) -> dict:
    from ..train.config import TrainConfig

    raw = TrainConfig.from_dict(config).to_dict()
    raw.get("run", {}).pop("out_dir", None)
    return raw


def _saved_config(run_dir: Path) -> dict | None:
    import yaml

    try:
        loaded = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return loaded if isinstance(loaded, dict) else None


def candidates(spec: StudySpec, study_dir: Path) -> list[RunSpec]:
    """The new design's final runs whose rate is known before any training."""
    shared = {cell: spec.shared_lr for cell in spec.cells()}
    every = {cell: tuple(spec.lrs) for cell in spec.cells()} if spec.tuning == "grid" and spec.tuned else None
    return spec.final_runs(study_dir, shared, every_rate=every)


def reuse_finished_runs(spec: StudySpec, study_dir: Path, source_dir: Path, log=print) -> list[str]:
    """Copy the reusable runs of ``source_dir`` into ``study_dir`` (see the module docstring); returns their ids.
    A run already in ``study_dir`` is left alone. ``ValueError`` when ``source_dir`` is no study folder."""
    source_dir, study_dir = Path(source_dir), Path(study_dir)
    if not (source_dir / RUNS_DIR).is_dir():
        raise ValueError(f"--reuse-from {source_dir}: no {RUNS_DIR}/ folder of finished runs there (a packed study "
                         "must be unpacked first)")
    copied, differing = [], []
    for run in candidates(spec, study_dir):
        old = source_dir / RUNS_DIR / run.run_dir.name
        if run.run_dir.exists() or (read_status(old) or {}).get("status") not in ("finished", "diverged"):
            continue
        saved = _saved_config(old)
        if saved is None or _normalised(saved) != _normalised(run.config):
            differing.append(run.run_id)
            continue
        run.run_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{run.run_dir.name}.", dir=run.run_dir.parent))
        try:  # a half-copied run folder never appears under its name
            shutil.copytree(old, staging / "run", ignore=shutil.ignore_patterns(*_SKIPPED))
            os.replace(staging / "run", run.run_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        copied.append(run.run_id)
    log(f"reused {len(copied)} finished run(s) from {source_dir}"
        + (f"; {len(differing)} with the same id were not reused because their config differs: "
           f"{', '.join(differing[:5])}{' …' if len(differing) > 5 else ''}" if differing else ""))
    return copied
