"""What makes a checkpoint *good*: finite weights and a finite forward on a fixed batch.

Finite weights can still give a non-finite forward (an overflow in a block), and a checkpoint file may be altered
after it was written; so the trainer checks both before writing a checkpoint, the runner checks both before
resuming from one, and a run that stops on a non-finite value names the newest checkpoint that passes.

The fixed batch is the first ``PROBE_SAMPLES`` samples of the evaluation split (else of the training split),
collated by the run's own loader and run through the model in eval mode under ``no_grad``. It is drawn under
``torch.random.fork_rng``, so a training-split augmentation that draws from the global generator leaves the run's
random streams untouched (bit-exact resume is kept).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from ...weight_checks import first_nonfinite
from .checkpoint import MODEL_FILE, list_checkpoints
from ..nonfinite import _finite
from ..trainer_view import TrainerView

__all__ = ["PROBE_SAMPLES", "probe_forward_is_finite", "last_good_checkpoint", "check_resume_finite"]

#: Samples in the fixed batch of the forward check.
PROBE_SAMPLES = 4


def _probe_inputs(trainer: TrainerView) -> Any:
    """The fixed batch's inputs on the run's device; for a dataset that cannot be indexed (an iterable dataset),
    the inputs of the last training batch, or ``None`` before the first step."""
    loader = trainer.eval_loader if trainer.eval_loader is not None else trainer.train_loader
    dataset = loader.dataset
    devices = [trainer.ctx.device] if trainer.ctx.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            batch = loader.collate_fn([dataset[i] for i in range(min(PROBE_SAMPLES, len(dataset)))])
    except (TypeError, NotImplementedError, IndexError, KeyError):
        batch = getattr(trainer, "batch", None)
        if batch is None:
            return None
    inputs = batch[0] if isinstance(batch, (tuple, list)) else batch  # the trainer's loop takes (x, y) batches
    return inputs.to(trainer.ctx.device) if hasattr(inputs, "to") else inputs


@torch.no_grad()
def probe_forward_is_finite(trainer: TrainerView) -> bool:
    """Whether the model's forward on the fixed batch is finite on this rank (a collective under FSDP: call it
    on every rank; every rank draws the same kind of batch). The model's train / eval mode is restored afterwards.
    ``True`` when there is no batch to try (an iterable dataset before the first step): the weights check stands
    alone then."""
    inputs = _probe_inputs(trainer)
    if inputs is None:
        return True
    model = trainer.wrapped if getattr(trainer, "_fsdp", False) else trainer.model
    was_training = model.training
    model.eval()
    amp = getattr(trainer, "_amp", None)  # the run's autocast (bf16), as in training and evaluation
    try:
        with amp() if amp is not None else nullcontext():
            out = model(inputs)
    finally:
        model.train(was_training)
    return _finite(out)


def _forward_finite_with(trainer: TrainerView, weights: dict[str, torch.Tensor]) -> bool:
    """Whether the forward on the fixed batch is finite with ``weights`` loaded; the model's own weights are put
    back afterwards (one extra copy of the weights, only when a run stops)."""
    model = trainer.model
    own = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:
        with torch.no_grad():
            model.load_state_dict(weights, strict=True)
        return probe_forward_is_finite(trainer)
    except (RuntimeError, ValueError):  # weights of another architecture: not a good checkpoint of this run
        return False
    finally:
        with torch.no_grad():
            model.load_state_dict(own, strict=True)


def last_good_checkpoint(run_dir: str | Path, exclude: Path | None = None,
                         trainer: TrainerView | None = None) -> Path | None:
    """The newest checkpoint of ``run_dir`` (other than ``exclude``) whose weights are all finite and, given the
    run's ``trainer``, whose forward on the fixed batch is finite too; ``None`` if there is none.

    The forward is re-checked on this process's copy of the model (no collective); under FSDP, whose shards cannot
    run alone, only the weights are re-checked — every checkpoint passed the forward check when it was written."""
    from ...checkpoint_io import read_state_dict_file

    check_forward = trainer is not None and not getattr(trainer, "_fsdp", False)
    for path in reversed(list_checkpoints(run_dir)):
        if exclude is not None and path.resolve() == Path(exclude).resolve():
            continue
        try:
            weights = read_state_dict_file(path / MODEL_FILE).tensors
        except (ValueError, OSError):
            continue
        if first_nonfinite(weights.items()) is None and (not check_forward or _forward_finite_with(trainer, weights)):
            return path
    return None


def check_resume_finite(trainer: TrainerView, checkpoint: Path, weights: dict[str, torch.Tensor]) -> None:
    """Before resuming from ``checkpoint`` (already restored into ``trainer``): ``ValueError`` if its weights, or
    the forward on the fixed batch, are not finite, naming the last good checkpoint (run on every rank)."""
    from ..distributed import all_reduce

    found = first_nonfinite(weights.items())
    bad = None if found is None else found[0]
    forward_ok = probe_forward_is_finite(trainer) if bad is None else True
    flags = torch.tensor([0.0 if forward_ok else 1.0], device=trainer.ctx.device)
    all_reduce(flags, trainer.ctx, op="max")
    if bad is None and flags.item() == 0:
        return
    what = f"weight {bad!r} is not finite" if bad is not None else "its forward on a fixed batch is not finite"
    good = last_good_checkpoint(checkpoint.parent.parent, exclude=checkpoint, trainer=trainer)
    hint = (f"last good checkpoint: {good} (resume from it with --resume {good})" if good is not None
            else "no other checkpoint of this run has finite weights")
    raise ValueError(f"{checkpoint}: cannot resume, {what}; {hint}")
