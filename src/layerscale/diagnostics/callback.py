"""The monitor inside ``layerscale train``: a trainer :class:`~layerscale.train.callbacks.Callback`.

The trainer's callbacks run after an optimizer step, when the gradients are already zeroed, so the callback
wires :class:`LayerScaleMonitor` to the step through hooks that need no change in the trainer:

* a forward pre-hook on the model opens step ``s = trainer.state.step + 1`` before its training forward when
  ``s`` is monitored (``s % every == 0``, and ``s = 1``, the forward at initialisation); evaluation forwards
  (model in eval mode) are ignored;
* an optimizer step pre-hook reads the gradient norms (after the trainer's clipping; these are what the
  optimizer applies);
* an optimizer step post-hook measures the update ratios and writes the record with ``trainer.log`` (rank 0
  writes ``metrics.jsonl``) and, with ``run.tensorboard``, scalars to ``RUN_DIR/tensorboard`` through the run's
  own writer (``trainer.metrics.add_scalars``: one TensorBoard writer per process, so the purge a resumed run
  writes at its first step cannot erase the other writer's new points).

A step skipped as non-finite never reaches the optimizer: its record (forward statistics only) is written when
the next step opens, which helps find the block that diverged.
"""

from __future__ import annotations

from typing import Any, Sequence

from torch import nn

from ..train.callbacks import Callback
from ..messages import shown_value
from .alerts import AlertThresholds, AlertTracker
from .monitor import LayerScaleMonitor
from .records import json_safe, tensorboard_scalars

__all__ = ["DiagnosticsCallback"]


class DiagnosticsCallback(Callback):
    """Records per-block diagnostics every ``every`` optimizer steps of a :class:`~layerscale.train.Trainer` run.

    ``thresholds`` configures the warnings; ``track_updates`` the update-to-weight ratio (one weight copy on
    monitored steps); ``new_blocks`` the blocks a grown model's surgery inserted, marked ``"new"`` in the records.
    Build it from a config section with :meth:`from_settings`.
    """

    def __init__(self, every: int = 50, thresholds: AlertThresholds | None = None, track_updates: bool = True,
                 new_blocks: Sequence[nn.Module] = ()):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"diagnostics every must be a positive int (record every k steps), got {every!r}")
        self.every = every
        self.thresholds = AlertThresholds.of(thresholds)
        self.track_updates = track_updates
        self.new_blocks = list(new_blocks)
        self.monitor: LayerScaleMonitor | None = None
        self._trainer = None
        self._handles: list[Any] = []
        self._restored_alerts: dict | None = None

    @classmethod
    def from_settings(cls, section: Any, new_blocks: Sequence[nn.Module] = ()) -> DiagnosticsCallback | None:
        """From an object or mapping with ``enabled``, ``every`` and optionally ``ratio_max``, ``ratio_growth``,
        ``ratio_growth_min``, ``scale_collapse``, ``track_updates`` (the ``diagnostics:`` config section), and the
        model's ``new_blocks``; ``None`` when ``enabled`` is false."""
        get = section.get if isinstance(section, dict) else (lambda key, default=None: getattr(section, key, default))
        if not get("enabled", True):
            return None
        defaults = AlertThresholds()
        thresholds = AlertThresholds(**{name: get(name, getattr(defaults, name))
                                        for name in ("ratio_max", "ratio_growth", "ratio_growth_min",
                                                     "scale_collapse")})
        return cls(every=get("every", 50), thresholds=thresholds, track_updates=get("track_updates", True),
                   new_blocks=new_blocks)

    # ---- trainer hooks --------------------------------------------------------------------------------------

    def on_train_start(self, trainer) -> None:
        self._remove_hooks()
        self._trainer = trainer
        is_main = trainer.ctx.is_main
        self.monitor = LayerScaleMonitor(trainer.model, every=self.every, log_fn=self._log,
                                         thresholds=self.thresholds, track_updates=self.track_updates,
                                         warn=is_main, new_blocks=self.new_blocks)
        if self._restored_alerts is not None:
            self.monitor.load_alert_state(self._restored_alerts)
            self._restored_alerts = None
        self._handles = [
            trainer.model.register_forward_pre_hook(self._open_step),
            trainer.optimizer.register_step_pre_hook(lambda *_: self.monitor.after_backward()),
            trainer.optimizer.register_step_post_hook(lambda *_: self.monitor.after_optimizer_step()),
        ]

    def state_dict(self) -> dict:
        """The warning state, saved in each training checkpoint (see :mod:`layerscale.train.state.callback_state`)."""
        if self.monitor is not None:
            return {"alerts": self.monitor.alert_state()}
        return {"alerts": self._restored_alerts} if self._restored_alerts is not None else {}

    def load_state_dict(self, state: dict) -> None:
        """Keep a checkpoint's warning state for the monitor that :meth:`on_train_start` builds, checked now
        (``ValueError`` naming the entry): a resumed run refuses it before it writes anything."""
        if not isinstance(state, dict) or not set(state) <= {"alerts"}:
            raise ValueError(f"state is {shown_value(state)}; expected a mapping with at most the key alerts")
        alerts = state.get("alerts")
        if alerts is not None:
            AlertTracker.parse_state(alerts)
        self._restored_alerts = alerts

    def on_train_end(self, trainer) -> None:
        if self.monitor is not None:
            self.monitor.end_step()
        self._remove_hooks()

    # ---- internals ------------------------------------------------------------------------------------------

    def _open_step(self, module, args) -> None:
        if not module.training:
            return
        step = self._trainer.state.step + 1
        if self.monitor.active and self.monitor.current_step == step:
            return  # a second forward of the same step (e.g. the non-finite replay): keep pooling
        self.monitor.begin_step(step, force=step == 1)

    def _log(self, record: dict) -> None:
        self._trainer.log(json_safe(record))
        add_scalars = getattr(self._trainer.metrics, "add_scalars", None)
        if add_scalars is not None and record.get("split") == "diagnostics":
            add_scalars(tensorboard_scalars(record), record["step"])

    def _remove_hooks(self) -> None:
        if self.monitor is not None:
            self.monitor.close()
        for handle in self._handles:
            handle.remove()
        self._handles = []
