"""The trainer's part of a checkpoint: where the run is (:class:`TrainState`), what a checkpoint of it holds, and
taking all of that back on resume.

A checkpoint is written only when it is *good*: every weight finite and a finite forward on a fixed batch
(:mod:`~layerscale.train.state.finite_check`), decided on every rank (a max all-reduce of the two flags), so a bad
step raises :class:`~layerscale.train.nonfinite.NonFiniteError` naming the last good checkpoint and leaves the
earlier ones untouched. Its ``train_state.pt`` holds the position (``step``, ``epoch``, ``batch_in_epoch``), the
training seconds so far, the optimizer (full state dict, gathered under FSDP), the scheduler, the RNG state of every
rank, early stopping, the latest and the test evaluation, and the callbacks' own state
(:mod:`~layerscale.train.state.callback_state`); the fields are checked on reading by
:mod:`~layerscale.train.state.train_state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..distributed import all_gather_objects, all_reduce, barrier, full_state_dicts, load_full_state_dicts
from ..nonfinite import NonFiniteError
from .callback_state import callback_states, load_callback_states
from .checkpoint import save_checkpoint
from .finite_check import last_good_checkpoint, probe_forward_is_finite
from .rng import capture_rng_state, restore_rng_state

__all__ = ["TrainState", "restore_trainer", "write_trainer_checkpoint"]


@dataclass
class TrainState:
    """Where the run is: ``step`` optimizer steps done, ``batch_in_epoch`` batches of epoch ``epoch`` (0-based)
    consumed, ``elapsed`` training seconds of earlier processes of this run, ``last_eval`` the latest eval record."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    elapsed: float = 0.0
    last_eval: dict[str, Any] = field(default_factory=dict)
    test_eval: dict[str, Any] = field(default_factory=dict)  # the one test evaluation of a run with a validation split


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def restore_trainer(trainer: Any, weights: dict[str, torch.Tensor], train_state: dict[str, Any],
                    fsdp: bool) -> str | None:
    """Put ``trainer`` (a :class:`~layerscale.train.loop.trainer.Trainer`) where the checkpoint left the run: its
    weights, optimizer, scheduler (its shape from the config, so extending ``optim.epochs`` extends the cosine),
    position, early stopping, callbacks and this rank's RNG state. Returns a warning line when the checkpoint was
    written by another number of processes (the RNG is then reseeded, without the bit-exactness guarantee), else
    ``None``."""
    load_full_state_dicts(trainer.wrapped, trainer.optimizer, weights, train_state["optimizer"], fsdp)
    scheduler, optimizer, o = trainer.scheduler, trainer.optimizer, trainer.config.optim
    scheduler.load_state_dict(train_state["scheduler"])
    scheduler.warmup_steps, scheduler.total_steps, scheduler.min_lr = o.warmup_steps, trainer.total_steps, o.min_lr
    scheduler.base_lrs = [o.lr] * len(optimizer.param_groups)
    for group, lr in zip(optimizer.param_groups, scheduler.get_lr(), strict=True):
        group["lr"] = lr
    trainer.state = TrainState(int(train_state["step"]), int(train_state["epoch"]),
                               int(train_state["batch_in_epoch"]), float(train_state.get("elapsed", 0.0)),
                               dict(train_state.get("last_eval", {})), dict(train_state.get("test_eval", {})))
    trainer.early_stopping.load_state_dict(train_state.get("early_stopping", {}))
    load_callback_states(trainer.callbacks, train_state.get("callbacks", {}))
    ctx, rng = trainer.ctx, train_state["rng"]
    if len(rng) == ctx.world_size:
        restore_rng_state(rng[ctx.rank], ctx.device)
        return None
    torch.manual_seed(trainer.config.run.seed + ctx.rank + 7919 * trainer.state.step)
    return (f"warning: the checkpoint was written by {len(rng)} process(es), this run has {ctx.world_size}: "
            "random augmentation / dropout streams are reseeded")


def write_trainer_checkpoint(trainer: Any, fsdp: bool, elapsed: Callable[[], float]) -> Path | None:
    """Check that ``trainer``'s current step is good, then write its checkpoint (rank 0 writes; a collective under
    FSDP) and return its directory (``None`` on the other ranks). ``elapsed()`` gives the run's training seconds.
    Raises :class:`~layerscale.train.nonfinite.NonFiniteError` instead if a weight, or the forward on a fixed
    batch, is not finite."""
    ctx, state, step = trainer.ctx, trainer.state, trainer.state.step
    bad = next((name for name, p in trainer.model.named_parameters()
                if not bool(torch.isfinite(_local(p.detach())).all())), None)
    forward_ok = probe_forward_is_finite(trainer)  # on every rank: a collective under FSDP
    flags = torch.tensor([0.0 if bad is None else 1.0, 0.0 if forward_ok else 1.0], device=ctx.device)
    all_reduce(flags, ctx, op="max")
    if flags.max().item() > 0:
        last = last_good_checkpoint(trainer.run_dir, trainer=trainer)
        what = (f"weights are non-finite ({bad or 'on another rank'})" if flags[0].item() > 0
                else "the forward on a fixed batch is not finite")
        raise NonFiniteError(f"{what} after step {step}; not checkpointed; last good checkpoint: "
                             f"{last if last is not None else 'none'}", step=step)
    weights, optim_state = full_state_dicts(trainer.wrapped, trainer.optimizer, ctx, fsdp)
    rng = all_gather_objects(capture_rng_state(ctx.device), ctx)
    path = None
    if ctx.is_main:
        train_state = {
            "step": step, "epoch": state.epoch, "batch_in_epoch": state.batch_in_epoch,
            "elapsed": elapsed(), "last_eval": state.last_eval, "world_size": ctx.world_size,
            "model": trainer.config.model.name, "model_args": trainer.model_args, "total_steps": trainer.total_steps,
            "optimizer": optim_state, "scheduler": trainer.scheduler.state_dict(), "rng": rng,
            "test_eval": state.test_eval, "early_stopping": trainer.early_stopping.state_dict(),
            "callbacks": callback_states(trainer.callbacks),
        }
        path = save_checkpoint(trainer.run_dir, step, weights, train_state, trainer.config.run.keep_checkpoints)
    barrier(ctx)
    return path
