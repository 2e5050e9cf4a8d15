"""Healing a pruned model: a short fine-tune with its source run's own recipe (``layerscale prune --heal-steps``).

The pruned model is written as a model folder with the run's training config rewritten for its new depth
(:func:`~layerscale.surgery.surgery_output.train_config_text`), and trained ``steps`` steps through
:func:`layerscale.train.runner.run` with the run's data, seed, optimizer and rate: ``optim.max_steps = steps`` and
``optim.epochs`` raised to at least ``steps`` (so the run's own epoch count cannot stop it early),
warmup ``min(optim.warmup_steps, steps // 10)``, the run's cosine schedule over the ``steps``, no test-split
evaluation (the caller measures the healed model on its own data). The healed
weights are loaded back into the model. Healing after pruning follows Gromov et al. 2024 (§3.2, "healing" with a
short fine-tune) and Men et al. 2024 (ShortGPT, §4.3, post-training after removal).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from torch import nn

__all__ = ["heal_pruned"]


def heal_pruned(model: nn.Module, source, steps: int, out: str | Path | None = None, *,
                lr: float | None = None, quiet: bool = False):
    """Fine-tune ``model`` (on the CPU, in place) for ``steps`` steps with the recipe of ``source.run`` (a
    :class:`~layerscale.surgery.model_files.SourceModel` read from a training run), at its peak rate or at ``lr``
    (its floor ``optim.min_lr`` lowered to ``lr`` when above it). The healing run is kept in ``out`` (a new
    folder) or, by default, in a temporary folder that is removed. ``quiet`` silences the trainer's lines.
    Returns the trainer's result (``run_dir``, ``checkpoint``, ``step``: the steps that ran)."""
    from ...checkpoint_io import read_state_dict_file
    from ...train.config.config_file import load_config_file
    from ...train.runner import run as train_run
    from ..model_files import TRAIN_CONFIG_NAME, write_model_folder
    from ..surgery_output import train_config_text

    if source.run is None:
        raise ValueError("healing needs a training run as the source: its config and data drive the fine-tune")
    if steps < 1:
        raise ValueError(f"healing steps must be >= 1, got {steps}")
    if lr is not None and not lr > 0:
        raise ValueError(f"the healing rate must be > 0, got {lr}")
    work = Path(tempfile.mkdtemp(prefix=".layerscale-heal-"))
    try:
        folder = work / "pruned"
        write_model_folder(model, source.library, folder, surgery={"operation": "prune"},
                           extra_files={TRAIN_CONFIG_NAME: train_config_text(model, source.run, folder)})
        raw = load_config_file(folder / TRAIN_CONFIG_NAME)
        # epochs >= steps: every epoch has at least one step, so max_steps (not the run's epoch count) ends it
        raw["optim"].update(max_steps=steps, epochs=max(int(raw["optim"].get("epochs") or 1), steps),
                            warmup_steps=min(raw["optim"].get("warmup_steps", 0), steps // 10))
        if lr is not None:
            raw["optim"].update(lr=lr, min_lr=min(raw["optim"].get("min_lr", 0.0), lr))
        raw["run"].update(progress="none", checkpoint_every_steps=0, evaluate_test=False)
        target = Path(out) if out is not None else work / "heal_run"
        result = _train(train_run, raw, target, quiet)
        weights = read_state_dict_file(Path(result.checkpoint) / "model.safetensors").tensors
        model.load_state_dict(weights)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _train(train_run, raw: dict, out: Path, quiet: bool):
    if not quiet:
        return train_run(raw, out=out)
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return train_run(raw, out=out)
