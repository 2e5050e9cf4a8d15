"""Run folders left the way a killed training process leaves them, for the resume tests of the study scripts."""

from __future__ import annotations

import shutil
from pathlib import Path


def kill_before_first_checkpoint(run: Path) -> None:
    """Leave the finished run folder ``run`` as a process killed before its first checkpoint leaves it: no
    ``summary.json``, no checkpoints (nothing to resume from), and a stray file of its own."""
    (run / "summary.json").unlink()
    shutil.rmtree(run / "checkpoints")
    (run / "leftover").write_text("a process ended mid-run")


def kill_after_step(config: dict, run: Path, step: int) -> None:
    """Train ``config`` into the new folder ``run`` and leave it as a process killed after its checkpoint at ``step``
    leaves it: no ``summary.json``, and a ``config.yaml`` that records the config with ``run.stop_at_step`` 0 (the
    design's config, as a run killed mid-way recorded it)."""
    from layerscale.train.config.config_file import dump_config, load_config_file
    from layerscale.train.runner import run as train_run

    train_run({**config, "run": {**config["run"], "stop_at_step": step}}, out=run)
    (run / "summary.json").unlink()  # a killed process writes none
    recorded = load_config_file(run / "config.yaml")
    recorded["run"]["stop_at_step"] = 0
    (run / "config.yaml").write_text(dump_config(recorded))
