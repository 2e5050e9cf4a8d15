"""What callbacks and the finite checks may read of a running trainer: :class:`TrainerView`.

A structural type (``typing.Protocol``): :class:`~layerscale.train.loop.trainer.Trainer` satisfies it without naming it,
so the modules the trainer imports (callbacks, finite checks) describe their argument without importing the
trainer back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

__all__ = ["TrainerView"]


class TrainerView(Protocol):
    """The public attributes of the trainer during a run (see :mod:`layerscale.train.callbacks` for their
    meaning)."""

    model: nn.Module  #: unwrapped from DDP
    wrapped: nn.Module  #: as trained (DDP / FSDP wrapper, or the model itself)
    state: Any  #: ``step``, ``epoch``, ``batch_in_epoch``
    batch: Any  #: ``(inputs, targets)`` of the step that just ended
    optimizer: torch.optim.Optimizer
    scheduler: Any
    config: Any  #: the run's :class:`~layerscale.train.config.schema.TrainConfig`
    run_dir: Path
    ctx: Any  #: ``rank``, ``world_size``, ``is_main``, ``device``
    train_loader: torch.utils.data.DataLoader
    eval_loader: torch.utils.data.DataLoader | None

    def log(self, record: dict[str, Any]) -> None: ...
