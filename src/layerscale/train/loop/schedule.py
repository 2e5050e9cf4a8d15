"""Per-step learning-rate schedule: linear warmup, then cosine decay (Loshchilov & Hutter 2017, SGDR, without
restarts) — the schedule of the DeiT / CaiT recipes, applied per optimizer step instead of per epoch."""

from __future__ import annotations

import math
import numbers

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from ...messages import shown_value

__all__ = ["WarmupCosineSchedule", "warmup_cosine_lr"]


def warmup_cosine_lr(step: int, base_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate of optimizer step ``step`` (0-based).

    ``step < W``: ``base · (step + 1) / W`` (so step 0 already moves); then, with ``p = (step - W) / (T - W)``
    clamped to [0, 1]: ``min + (base - min) · (1 + cos(π p)) / 2``, from ``base`` at ``step = W`` down to ``min`` at
    ``step = T`` (``W`` = warmup_steps, ``T`` = total_steps).
    """
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _count(name: str, value: object, low: int) -> int:
    """``value`` as an ``int`` >= ``low``; a one-line error naming ``name`` for a bool, a float (2.7 is no step
    count) or anything else."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {low}, got {type(value).__name__} {shown_value(value)}")
    if value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class WarmupCosineSchedule(LRScheduler):
    """Sets every parameter group's ``lr`` to :func:`warmup_cosine_lr` of the step about to be taken.

    Call ``step()`` after each ``optimizer.step()``. Its ``state_dict()`` holds numbers only, so it round-trips
    through ``torch.load(weights_only=True)``. A group's ``min_lr`` is capped at its base lr.
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> None:
        self.warmup_steps = _count("warmup_steps", warmup_steps, 0)
        self.total_steps = _count("total_steps", total_steps, 1)
        if isinstance(min_lr, bool) or not isinstance(min_lr, numbers.Real):
            raise TypeError(f"min_lr must be a finite number >= 0, got {type(min_lr).__name__} {shown_value(min_lr)}")
        if not math.isfinite(min_lr) or min_lr < 0:
            raise ValueError(f"min_lr must be a finite number >= 0, got {min_lr!r}")
        self.min_lr = float(min_lr)
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [warmup_cosine_lr(self.last_epoch, base, min(self.min_lr, base), self.warmup_steps, self.total_steps)
                for base in self.base_lrs]
