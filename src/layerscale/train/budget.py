"""How many optimizer steps a run takes: one rule shared by the trainer and by the study's planning."""

from __future__ import annotations

from .config import OptimConfig

__all__ = ["planned_total_steps"]


def planned_total_steps(optim: OptimConfig, steps_per_epoch: int) -> int:
    """``optim.epochs × steps_per_epoch``, capped by ``optim.max_steps`` when that is set (> 0). An epoch is
    ``floor(training samples per process / batch per process)`` steps (the trainer drops the last partial batch)."""
    total = optim.epochs * steps_per_epoch
    return min(total, optim.max_steps) if optim.max_steps else total
