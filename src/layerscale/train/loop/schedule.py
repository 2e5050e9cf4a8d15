"""Per-step learning-rate schedule: linear warmup, then cosine decay (Loshchilov & Hutter 2017, SGDR, without
restarts) — the schedule of the DeiT / CaiT recipes, applied per optimizer step instead of per epoch."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

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


class WarmupCosineSchedule(LRScheduler):
    """Sets every parameter group's ``lr`` to :func:`warmup_cosine_lr` of the step about to be taken.

    Call ``step()`` after each ``optimizer.step()``. Its ``state_dict()`` holds numbers only, so it round-trips
    through ``torch.load(weights_only=True)``. A group's ``min_lr`` is capped at its base lr.
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> None:
        if warmup_steps < 0 or total_steps < 1:
            raise ValueError(f"need warmup_steps >= 0 and total_steps >= 1, got {warmup_steps} and {total_steps}")
        self.warmup_steps, self.total_steps, self.min_lr = int(warmup_steps), int(total_steps), float(min_lr)
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [warmup_cosine_lr(self.last_epoch, base, min(self.min_lr, base), self.warmup_steps, self.total_steps)
                for base in self.base_lrs]
