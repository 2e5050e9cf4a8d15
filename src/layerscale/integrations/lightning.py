"""``LayerScaleMonitor``: the diagnostics of ``layerscale train`` as a Lightning callback.

Add it to a ``lightning.Trainer``; it runs :class:`layerscale.diagnostics.LayerScaleMonitor` (the same records, the
same warnings; see ``docs/diagnostics.md``) on the ``LightningModule``'s transformer blocks — ours, timm's or Hugging
Face's — every ``every`` optimizer steps, and

* logs each record's scalars to every Lightning logger (``diagnostics_ratio_attn/blocks.3``, ...; the names the
  TensorBoard output of ``layerscale train`` uses);
* writes a run directory that ``layerscale report`` reads: ``metrics.jsonl`` (training loss, the logged validation
  metrics, the diagnostics records and warnings), ``config.yaml`` (the model's class, residual method and depth)
  and, when fitting ends, ``summary.json``. The directory is ``dirpath``, else the logger's ``log_dir`` (a new
  ``version_N`` per run), else — ``logger=False`` — a new ``lightning_logs/version_N`` under the trainer's
  ``default_root_dir`` (never the folder itself: a second run never appends to the first one's records).

One ``train`` record per optimizer step (every ``log_every_n_steps``, and step 1): its ``loss`` is the mean of the
losses ``training_step`` returned for that step's micro-batches. Lightning hands callbacks each micro-batch's loss
divided by ``accumulate_grad_batches``; the callback multiplies it back before averaging.

Steps are counted as the trainer counts optimizer steps: the record of step ``s`` describes the forward and backward
that the ``s``-th optimizer step applies (with gradient accumulation, all of its micro-batches). Gradient norms are
read in ``on_before_optimizer_step``, which Lightning calls before it clips gradients. Only global rank 0 writes.
A run resumed from a checkpoint (``trainer.fit(..., ckpt_path=...)``) into the same directory first drops the
records written after that checkpoint, so each step is recorded once.

The monitor is built at fit start, so weights loaded into the module before ``trainer.fit`` (a fine-tuned
checkpoint) are what ``scale_collapse`` compares against. The warning state — that reference, the active alerts, the
last ratios — is saved in Lightning checkpoints (:meth:`LayerScaleMonitor.state_dict`), so a resumed fit keeps the
first fit's reference rather than taking the checkpoint's γ as its start.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import torch

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("layerscale.integrations.lightning needs lightning: pip install 'torch-layerscale[lightning]'"
                      ) from None

from ..atomic_io import write_json_atomic, write_text_atomic
from ..diagnostics.alerts import AlertThresholds
from ..diagnostics.monitor import LayerScaleMonitor as _BlockMonitor
from ..diagnostics.records import json_safe, tensorboard_scalars
from ..diagnostics.run_data import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from ..train.records.metrics_log import truncate_metrics

__all__ = ["LayerScaleMonitor"]


def _number(value: Any) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _new_version_dir(root: Path) -> Path:
    """``root/version_N`` with ``N`` one more than the largest existing version (0 for the first), as
    Lightning's own loggers number their runs."""
    taken = [int(p.name[8:]) for p in root.glob("version_*") if p.name[8:].isdigit()] if root.is_dir() else []
    return root / f"version_{max(taken, default=-1) + 1}"


class LayerScaleMonitor(Callback):
    """Per-block diagnostics of a Lightning run, logged and written to ``dirpath`` for ``layerscale report``.

    ``every``: record every ``every`` optimizer steps (and the first step). ``dirpath``: the run directory
    (default: the logger's ``log_dir``; without a logger a new ``default_root_dir/lightning_logs/version_N``). ``eval_metrics``: report field →
    the name your ``LightningModule`` logs it under during validation (default ``loss`` ← ``val_loss``,
    ``accuracy`` ← ``val_acc``); each one present is written as an ``eval`` record. ``thresholds`` and
    ``track_updates`` as in :class:`layerscale.diagnostics.LayerScaleMonitor`. A bad ``every`` or a module without
    recognisable transformer blocks is a ``ValueError``.
    """

    def __init__(self, every: int = 50, dirpath: str | os.PathLike | None = None,
                 eval_metrics: dict[str, str] | None = None, thresholds: AlertThresholds | None = None,
                 track_updates: bool = True) -> None:
        super().__init__()
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive int (record every k optimizer steps), got {every!r}")
        self.every = every
        self.dirpath = None if dirpath is None else Path(dirpath)
        self.eval_metrics = dict(eval_metrics) if eval_metrics is not None else {"loss": "val_loss",
                                                                                 "accuracy": "val_acc"}
        self.thresholds = AlertThresholds.of(thresholds)
        self.track_updates = track_updates
        self.monitor: _BlockMonitor | None = None
        self.run_dir: Path | None = None
        self._trainer = None
        self._file = None
        self._micro_losses: list[float] = []  # the losses of the optimizer step being accumulated
        self._last_step = 0
        self._restored_alerts: dict | None = None  # a checkpoint's warning state, for this fit's monitor
        self._fitting = False  # whether self.monitor is this fit's (Lightning may restore before or after setup)

    # ---- fit lifecycle --------------------------------------------------------------------------------------

    def on_fit_start(self, trainer, pl_module) -> None:
        self._trainer = trainer
        main = trainer.is_global_zero
        self.monitor = _BlockMonitor(pl_module, every=self.every, log_fn=self._write,
                                     thresholds=self.thresholds, track_updates=self.track_updates, warn=main)
        self._fitting = True
        if self._restored_alerts is not None:
            self.monitor.load_alert_state(self._restored_alerts)
            self._restored_alerts = None
        if not main:
            return
        self.run_dir = self.dirpath or (Path(trainer.log_dir) if trainer.loggers and trainer.log_dir
                                        else _new_version_dir(Path(trainer.default_root_dir) / "lightning_logs"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.run_dir / CONFIG_FILE, json.dumps(self._config(pl_module), indent=2) + "\n")

    def on_train_start(self, trainer, pl_module) -> None:
        if self.run_dir is None or self._file is not None:
            return
        self._last_step, self._micro_losses = trainer.global_step, []
        if trainer.global_step:  # resumed (the step is restored after on_fit_start): drop the records written
            truncate_metrics(self.run_dir / METRICS_FILE, trainer.global_step)  # after the checkpoint
        self._file = open(self.run_dir / METRICS_FILE, "a", encoding="utf-8")  # noqa: SIM115 (closed at fit end)

    def on_fit_end(self, trainer, pl_module) -> None:
        self._finish()
        if trainer.is_global_zero and self.run_dir is not None:
            write_json_atomic(self.run_dir / SUMMARY_FILE, {"steps": trainer.global_step,
                                                             "blocks": len(self.monitor.probes) if self.monitor
                                                             else None})

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._finish()

    def state_dict(self) -> dict[str, Any]:
        """The warning state (:meth:`layerscale.diagnostics.LayerScaleMonitor.alert_state`), saved in Lightning
        checkpoints."""
        if self.monitor is not None:
            return {"alerts": self.monitor.alert_state()}
        return {"alerts": self._restored_alerts} if self._restored_alerts is not None else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into this fit's monitor (now, or when the fit builds it)."""
        alerts = state_dict.get("alerts") if isinstance(state_dict, dict) else None
        if self._fitting and self.monitor is not None and alerts is not None:
            self.monitor.load_alert_state(alerts)
        else:
            self._restored_alerts = alerts

    # ---- steps ----------------------------------------------------------------------------------------------

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        step = trainer.global_step + 1
        if self.monitor.active and self.monitor.current_step == step:
            return  # another micro-batch of the same optimizer step: keep pooling
        self.monitor.begin_step(step, force=step == 1)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.monitor.after_backward()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if self.monitor.active and self.monitor.current_step == step:  # its optimizer step has been taken
            self.monitor.after_optimizer_step()
        loss = _number(outputs.get("loss") if isinstance(outputs, dict) else outputs)
        if loss is not None:  # Lightning passes the micro-batch loss divided by the accumulation count
            self._micro_losses.append(loss * trainer.accumulate_grad_batches)
        if step == self._last_step:
            return  # no optimizer step yet: another micro-batch of this one follows
        self._last_step = step
        losses, self._micro_losses = self._micro_losses, []
        if losses and (step % trainer.log_every_n_steps == 0 or step == 1):
            self._write({"split": "train", "step": step, "loss": sum(losses) / len(losses)})

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        metrics = trainer.callback_metrics
        record = {field: _number(metrics[name]) for field, name in self.eval_metrics.items() if name in metrics}
        record = {k: v for k, v in record.items() if v is not None}
        if record:
            self._write({"split": "eval", "step": trainer.global_step, **record})

    # ---- internals ------------------------------------------------------------------------------------------

    def _config(self, pl_module) -> dict[str, Any]:
        """What the report shows about the run: the model class, residual method and depth."""
        owner = next((m for m in pl_module.modules() if isinstance(getattr(m, "residual", None), str)), None)
        scaled = any(branch.scale is not None for probe in self.monitor.probes for branch in probe.branches)
        return {"model": {
            "name": type(owner if owner is not None else pl_module).__name__,
            "residual": owner.residual if owner is not None else ("layerscale" if scaled else "none"),
            "depth": getattr(owner, "depth", None) if owner is not None else len(self.monitor.probes),
        }, "trainer": {"framework": "lightning", "diagnostics_every": self.every}}

    def _write(self, record: dict) -> None:
        if self._file is not None:
            self._file.write(json.dumps(json_safe(record)) + "\n")
            self._file.flush()
        if record.get("split") == "diagnostics" and self._trainer is not None:
            scalars = {k: v for k, v in tensorboard_scalars(record).items() if math.isfinite(v)}
            for logger in self._trainer.loggers:
                logger.log_metrics(scalars, step=record["step"])

    def _finish(self) -> None:
        self._fitting = False
        if self.monitor is not None:
            self.monitor.end_step()
            self.monitor.close()
        if self._file is not None:
            self._file.close()
            self._file = None
