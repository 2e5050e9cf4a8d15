"""How many optimizer steps a run takes: one rule shared by the trainer and by the study's planning."""

from __future__ import annotations

from ..config.schema import OptimConfig

__all__ = ["planned_total_steps", "steps_per_epoch"]


def steps_per_epoch(num_train: int, batch_size: int, world_size: int = 1) -> int:
    """Optimizer steps in one epoch: ``floor(floor(num_train / world_size) / floor(batch_size / world_size))`` (each
    process takes an equal share of the samples and of the batch and drops its last partial batch); 0 when the batch
    is larger than a process's share."""
    per_rank_batch = batch_size // world_size
    return (num_train // world_size) // per_rank_batch if per_rank_batch else 0


def planned_total_steps(optim: OptimConfig, steps_per_epoch: int) -> int:
    """``optim.epochs × steps_per_epoch``, capped by ``optim.max_steps`` when that is set (> 0). An epoch is
    ``floor(training samples per process / batch per process)`` steps (the trainer drops the last partial batch)."""
    total = optim.epochs * steps_per_epoch
    return min(total, optim.max_steps) if optim.max_steps else total
