"""The trainer's extension point: objects whose methods it calls at fixed moments of a run.

Subclass :class:`Callback` and override what you need; pass instances as ``layerscale.train.run(config,
callbacks=[...])``. Every method receives the :class:`~layerscale.train.loop.trainer.Trainer`, whose public attributes
are the contract:

- ``trainer.model``: the module being trained, unwrapped from DDP (under FSDP its parameters are sharded DTensors;
  reading them is a collective, so do it on every rank);
- ``trainer.state``: ``step`` (optimizer steps done), ``epoch``, ``batch_in_epoch``;
- ``trainer.batch``: the ``(inputs, targets)`` of the step that just ended (on the run's device);
- ``trainer.optimizer``, ``trainer.scheduler``, ``trainer.config``, ``trainer.run_dir``, ``trainer.ctx``
  (``rank``, ``world_size``, ``is_main``, ``device``);
- ``trainer.log(record)``: writes ``record`` (a dict with at least ``"split"``; ``step``, ``epoch`` and ``time``
  are added when absent) as one line of ``metrics.jsonl`` and to TensorBoard, on rank 0 only.

Hooks a callback puts on ``trainer.model`` also see the other forwards of the model: evaluation
(``model.training`` is False, under ``no_grad``) and the replay of a non-finite step (under ``no_grad``); the
training forward is the one with ``torch.is_grad_enabled()`` and ``model.training`` both true.

Callbacks run on every rank, in the order given, after the trainer's own work for that moment. A run resumed from
a checkpoint calls ``on_train_start`` again with ``trainer.state`` already at the checkpoint's step. A callback
that keeps state across a resume either derives it from ``trainer.state`` or defines ``state_dict()`` /
``load_state_dict(state)`` (plain data), which checkpoints save and a resume restores before ``on_train_start``
(see :mod:`layerscale.train.state.callback_state`).
"""

from __future__ import annotations

from typing import Any

from .trainer_view import TrainerView

__all__ = ["Callback"]


class Callback:
    """Base class: every hook does nothing."""

    def on_train_start(self, trainer: TrainerView) -> None:
        """Before the first step of this process (after any resume)."""

    def on_step_end(self, trainer: TrainerView, step: int) -> None:
        """After optimizer step ``step`` (1-based count of steps done), before logging / evaluation / checkpoint.
        Not called for a step skipped as non-finite."""

    def on_eval_end(self, trainer: TrainerView, step: int, metrics: dict[str, Any]) -> None:
        """After an evaluation at ``step``; ``metrics`` is the record just logged (reduced over ranks)."""

    def on_checkpoint(self, trainer: TrainerView, step: int, path: Any) -> None:
        """After checkpoint ``step`` was written (``path`` is its directory on rank 0, ``None`` elsewhere)."""

    def on_train_end(self, trainer: TrainerView) -> None:
        """After the last step, evaluation and checkpoint (not called when the run stops on an error)."""
