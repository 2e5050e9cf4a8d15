"""Named studies: the demo, the Fashion-MNIST depth study, the language-model depth study and the 1,000-block run.

Each preset is a :class:`~layerscale.study.design.grid.StudySpec`: a base training config (``docs/training.md``) and the
study's design. The designs below were fixed before their studies were run (``docs/results/*/DESIGN.md`` records
each one with its date); budgets are sized to the machine they were run on (2 CPU cores) and to the rule stated
there, never adjusted after seeing which method wins.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from .grid import StudySpec

__all__ = ["Preset", "PRESETS", "get_preset"]


@dataclass(frozen=True)
class Preset:
    description: str
    spec: StudySpec


def _vit(**model) -> dict[str, Any]:
    return {"name": "vit", "mlp_ratio": 2.0, **model}


_RUN = {"progress": "none", "deterministic": True, "keep_checkpoints": 1}

PRESETS: dict[str, Preset] = {
    "demo": Preset(
        "scikit-learn digits (offline), ViT width 64: Pre-LN, LayerScale and ReZero at depths 6 and 24, 2 seeds, "
        "each at the better of two learning rates by full-budget validation over its seeds (the shared 1e-3 is one "
        "of them, so the shared table comes with it); about 4 minutes on 2 cores",
        StudySpec(
            methods=("prenorm", "layerscale", "rezero"), depths=(6, 24), seeds=(0, 1), lrs=(1e-3, 3e-3),
            validation_fraction=0.15, target=80.0, tuning="grid",
            # with two rates every choice is an edge: an extension would run for nearly every cell and break the
            # demo's time budget; the full studies extend (their designs say so)
            extend_grid=0,
            base={"model": _vit(patch_size=4, embed_dim=64, num_heads=4),
                  "data": {"name": "digits", "batch_size": 64, "eval_batch_size": 512, "augment": False},
                  "optim": {"epochs": 8, "lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 10, "weight_decay": 0.05},
                  "run": {**_RUN, "checkpoint_every_steps": 50, "eval_every_steps": 19},
                  "diagnostics": {"every": 5}}),
    ),
    "fashion": Preset(
        "Fashion-MNIST, ViT 28x28 / patch 7 (16 tokens), width 64, 8 methods at depths 12, 24, 48, 3 seeds (5 at "
        "depth 48, the primary family), each at its rate chosen from 3e-4, 1e-3, 3e-3 by full-budget validation "
        "(--tuning grid, extended once at an edge) on a 10 % validation split, 2 epochs of batch 64, early "
        "stopping with patience 3 (docs/results/fashion/DESIGN.md, addendum 2026-12-01)",
        StudySpec(
            methods=("prenorm", "postnorm", "layerscale", "layerscale_head", "rezero", "deepnorm", "lns", "dyt"),
            depths=(12, 24, 48), seeds=(0, 1, 2), lrs=(3e-4, 1e-3, 3e-3), validation_fraction=0.1,
            patience=3, min_delta=0.001, target=80.0, tuning="grid", extend_grid=1, primary_seeds=5,
            bootstrap=2000,
            base={"model": _vit(patch_size=7, embed_dim=64, num_heads=4),
                  "data": {"name": "fashion-mnist", "batch_size": 64, "eval_batch_size": 1000, "augment": False},
                  "optim": {"epochs": 2, "lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 84, "weight_decay": 0.05},
                  "run": {**_RUN, "checkpoint_every_steps": 250, "eval_every_steps": 250},
                  "diagnostics": {"every": 50}}),
    ),
    "lm": Preset(
        "byte-level GPT (width 64, 4 heads, windows of 64 bytes) on the Vim documentation shipped by Debian's "
        "vim-runtime (/usr/share/vim/vim90/doc/*.txt, 9.5 MB): Pre-LN, LayerScale, DeepNorm and LayerNorm "
        "Scaling at depths 24, 48, 96, each at its rate chosen from 1e-3, 3e-3, 1e-2 by full-budget validation "
        "(--tuning grid, extended once at an edge), 3 seeds (5 at depth 96, the primary family), 1,200 steps of 16 "
        "windows; test bits per byte (docs/results/lm/DESIGN.md, addendum 2026-12-01)",
        StudySpec(
            methods=("prenorm", "layerscale", "deepnorm", "lns"), depths=(24, 48, 96), seeds=(0, 1, 2),
            lrs=(1e-3, 3e-3, 1e-2), validation_fraction=0.05, patience=3, min_delta=0.001, tuning="grid",
            extend_grid=1, primary_seeds=5, bootstrap=2000,
            base={"model": {"name": "gpt", "embed_dim": 64, "num_heads": 4, "block_size": 64, "mlp_ratio": 4.0},
                  "data": {"name": "text", "path": "/usr/share/vim/vim90/doc/*.txt", "val_fraction": 0.1,
                           "block_size": 64, "batch_size": 16, "eval_batch_size": 64},
                  "optim": {"epochs": 1, "max_steps": 1200, "lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 60,
                            "weight_decay": 0.05},
                  "run": {**_RUN, "checkpoint_every_steps": 200, "eval_every_steps": 200, "eval_batches": 40},
                  "diagnostics": {"every": 50}}),
    ),
    "deep1000": Preset(
        "1,000-block ViT (width 32, activation checkpointing per block) on Fashion-MNIST, 40 steps of batch 16, "
        "the same learning rate for every method, one seed: a stability demonstration, not a comparison",
        StudySpec(
            methods=("layerscale", "prenorm", "postnorm"), depths=(1000,), seeds=(0,), validation_fraction=0.0,
            base={"model": _vit(patch_size=7, embed_dim=32, num_heads=2, grad_checkpointing=True),
                  "data": {"name": "fashion-mnist", "batch_size": 16, "eval_batch_size": 64, "augment": False},
                  "optim": {"epochs": 1, "max_steps": 40, "lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 4,
                            "weight_decay": 0.05},
                  "run": {**_RUN, "checkpoint_every_steps": 10, "eval_every_steps": 20, "eval_batches": 4,
                          "log_every_steps": 1},
                  "diagnostics": {"every": 2}}),
    ),
}


def get_preset(name: str) -> Preset:
    """A deep copy of preset ``name``; unknown names raise ``ValueError`` listing the known ones."""
    if name not in PRESETS:
        raise ValueError(f"unknown study preset {name!r}; known presets: {', '.join(sorted(PRESETS))}")
    return copy.deepcopy(PRESETS[name])
