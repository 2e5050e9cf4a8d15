"""Shared helpers: a tiny training run with the diagnostics callback, and readers for its records."""

from __future__ import annotations

import json
from pathlib import Path

from layerscale.train import Callback, run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def tiny_config(out_dir: Path, residual: str = "layerscale", depth: int = 3, steps: int = 6, **run_keys) -> dict:
    return {
        "model": {"name": "vit", "embed_dim": 32, "depth": depth, "num_heads": 2, "patch_size": 2,
                  "residual": residual, "init_value": 0.1},
        "data": {"name": "digits", "batch_size": 32, "augment": False},
        "optim": {"epochs": 1, "max_steps": steps, "lr": 1e-2, "grad_clip": 0.0},
        "run": {"out_dir": str(out_dir), "progress": "none", "log_every_steps": 2, **run_keys},
    }


def train_tiny(out_dir: Path, residual: str = "layerscale", every: int = 2, callbacks: tuple[Callback, ...] = (),
               **config_keys):
    """Train the tiny config with the trainer's ``diagnostics`` section (``every``) and extra ``callbacks``."""
    config = tiny_config(out_dir, residual, **config_keys)
    config["diagnostics"] = {"enabled": True, "every": every}
    return run(config, callbacks=list(callbacks))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def diagnostics_by_step(run_dir: Path) -> dict[int, dict]:
    return {r["step"]: r for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if r.get("split") == "diagnostics"}
