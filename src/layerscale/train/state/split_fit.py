"""A resumed run keeps the data split it has trained on.

``--set`` on resume may change the saved config (docs/training.md, "Resuming"), but not the keys that decide which
examples are held out: the dataset (``data.name``, ``data.path``) and its split (``data.test_fraction``,
``data.split_seed``, ``data.validation_fraction``, and for text ``data.val_fraction``). Changed after training has
begun, the new validation and test splits would hold examples the model has already trained on, and the run would
report a "held-out" score that is not (an audit of 2026-12-07 found 247 of 359 test images trained on after
``--set data.split_seed=1``, the resume accepted without a word).
"""

from __future__ import annotations

from pathlib import Path

from ...messages import shown_value
from ..config.schema import DataConfig

__all__ = ["SPLIT_KEYS", "check_same_split"]

#: the ``data`` keys that decide which examples are trained on and which are held out
SPLIT_KEYS = ("name", "path", "test_fraction", "split_seed", "validation_fraction", "val_fraction")


def check_same_split(saved: DataConfig, new: DataConfig, run_dir: Path) -> None:
    """One-line ``ValueError`` naming the first of :data:`SPLIT_KEYS` whose value ``new`` changes from ``saved``
    (the config the run in ``run_dir`` trained with)."""
    for key in SPLIT_KEYS:
        before, after = getattr(saved, key), getattr(new, key)
        if before != after:
            raise ValueError(f"{run_dir}: data.{key} {shown_value(before)} -> {shown_value(after)} on resume would "
                             f"change which examples are held out: the run has trained with the first, so its "
                             f"validation and test splits would hold examples it trained on; start a new run for "
                             f"another split")
