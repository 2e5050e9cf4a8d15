"""``layerscale train`` configurations for the tests of the commands that read a run directory (see
:func:`train_with_cli` in tests/conftest.py)."""

from __future__ import annotations


def tiny_vit_digits_config(depth: int, **data_keys) -> dict:
    """A ViT of width 16 (2 heads, 4×4 patches) and ``depth`` blocks trained 4 steps on digits, batches of 32, a log
    and a checkpoint every 2 steps, no progress bar; ``data_keys`` join the data section (``validation_fraction``)."""
    return {
        "model": {"name": "vit", "embed_dim": 16, "depth": depth, "num_heads": 2, "patch_size": 4},
        "data": {"name": "digits", "batch_size": 32, **data_keys},
        "optim": {"epochs": 1, "max_steps": 4, "warmup_steps": 1, "lr": 3e-3},
        "run": {"progress": "none", "log_every_steps": 2, "checkpoint_every_steps": 2},
    }
