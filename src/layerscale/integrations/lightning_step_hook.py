"""``ResidualStepHook``: the residual methods' step hook in a Lightning run.

:func:`layerscale.residual.after_optimizer_step` after every optimizer step of a ``lightning.Trainer`` fit, with the
step's number (``trainer.global_step``) and the steps the fit plans (``trainer.estimated_stepping_batches``), so a
model of ours trains as ``layerscale train`` trains it: BHyT's correction follows the weights as its authors'
pre-training updates it (docs/methods.md, "BHyT"). With gradient accumulation the hook runs once per optimizer step,
after its last micro-batch. Add it to the ``Trainer``'s callbacks; a fit without it leaves such state at its first
value. Needs the ``lightning`` extra.
"""

from __future__ import annotations

import math

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("layerscale.integrations.lightning_step_hook needs lightning: pip install "
                      "'torch-layerscale[lightning]'") from None

from ..residual.step_hook import after_optimizer_step

__all__ = ["ResidualStepHook"]


class ResidualStepHook(Callback):
    """Calls :func:`~layerscale.residual.after_optimizer_step` on the ``LightningModule`` after each optimizer
    step (see the module docstring)."""

    def __init__(self) -> None:
        self._last_step: int | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step < 1 or step == self._last_step:
            return  # no optimizer step yet, or another micro-batch of the same one
        self._last_step = step
        total = trainer.estimated_stepping_batches
        if not math.isfinite(total):
            raise ValueError("ResidualStepHook needs the number of steps the fit plans; give the Trainer max_steps "
                             "or max_epochs (estimated_stepping_batches is infinite)")
        after_optimizer_step(pl_module, step, int(total))
