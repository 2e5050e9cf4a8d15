"""Named studies: the demo, the Fashion-MNIST depth study and the 1,000-block run.

Each preset is a base training config (``docs/training.md``) with default methods, depths and seeds. The budgets and
learning rates were fixed before any of these studies was run, by the rule stated in ``docs/RESULTS.md``: AdamW at
the learning rate that is standard for small ViTs trained from scratch (1e-3, cosine, 5 % warmup, weight decay
0.05), the same for every method and depth, and a step budget sized to the machine (2 CPU cores).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Preset", "PRESETS", "get_preset"]


@dataclass(frozen=True)
class Preset:
    description: str
    methods: tuple[str, ...]
    depths: tuple[int, ...]
    seeds: int
    base: dict[str, Any] = field(default_factory=dict)


def _vit(**model) -> dict[str, Any]:
    return {"name": "vit", "mlp_ratio": 2.0, **model}


_RUN = {"progress": "none", "deterministic": True, "keep_checkpoints": 1}

PRESETS: dict[str, Preset] = {
    "demo": Preset(
        "scikit-learn digits (offline), ViT width 64, 4 methods at depths 6 and 24: under 3 minutes on 2 cores",
        methods=("prenorm", "layerscale", "rezero", "postnorm"), depths=(6, 24), seeds=1,
        base={"model": _vit(patch_size=4, embed_dim=64, num_heads=4),
              "data": {"name": "digits", "batch_size": 64, "augment": False},
              "optim": {"epochs": 6, "lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 20, "weight_decay": 0.05},
              "run": {**_RUN, "checkpoint_every_steps": 60}},
    ),
    "fashion": Preset(
        "Fashion-MNIST, ViT 28x28 / patch 7 (16 tokens), width 64, 7 methods at depths 12, 24, 48, 2 seeds, "
        "150 steps of batch 64 each",
        methods=("prenorm", "postnorm", "rezero", "deepnorm", "lns", "layerscale", "layerscale_head"),
        depths=(12, 24, 48), seeds=2,
        base={"model": _vit(patch_size=7, embed_dim=64, num_heads=4),
              "data": {"name": "fashion-mnist", "batch_size": 64, "eval_batch_size": 256, "augment": False},
              "optim": {"epochs": 1, "max_steps": 150, "lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 10,
                        "weight_decay": 0.05},
              "run": {**_RUN, "checkpoint_every_steps": 50, "eval_every_steps": 75, "eval_batches": 20}},
    ),
    "deep1000": Preset(
        "1,000-block ViT (width 32, activation checkpointing per block) on Fashion-MNIST, 40 steps of batch 16, "
        "the same learning rate for every method",
        methods=("layerscale", "prenorm", "postnorm"), depths=(1000,), seeds=1,
        base={"model": _vit(patch_size=7, embed_dim=32, num_heads=2, grad_checkpointing=True),
              "data": {"name": "fashion-mnist", "batch_size": 16, "eval_batch_size": 64, "augment": False},
              "optim": {"epochs": 1, "max_steps": 40, "lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 4,
                        "weight_decay": 0.05},
              "run": {**_RUN, "checkpoint_every_steps": 10, "eval_every_steps": 20, "eval_batches": 4,
                      "log_every_steps": 1},
              "diagnostics": {"every": 10}},
    ),
}


def get_preset(name: str) -> Preset:
    """A deep copy of preset ``name``; unknown names raise ``ValueError`` listing the known ones."""
    if name not in PRESETS:
        raise ValueError(f"unknown study preset {name!r}; known presets: {', '.join(sorted(PRESETS))}")
    return copy.deepcopy(PRESETS[name])
