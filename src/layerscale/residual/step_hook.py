"""The call a training loop makes after each optimizer step, so that every residual method in a model can update
what its recipe updates during training (:meth:`~layerscale.residual.base.ResidualMethod.after_optimizer_step`;
today only BHyT, whose variance correction follows the weights)."""

from __future__ import annotations

from torch import nn

__all__ = ["after_optimizer_step"]


def after_optimizer_step(model: nn.Module, step: int, total_steps: int) -> None:
    """Run ``after_optimizer_step(module, step, total_steps)`` of the residual method of every model of ours inside
    ``model`` (a module with a ``residual_method``: ``model`` itself, or one wrapped in a module of one's own).

    ``layerscale train`` calls it after every applied step; a loop of one's own calls it after each
    ``optimizer.step()`` with the step's 1-based number and the number of steps it plans. Anything else is a no-op.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"step must be the 1-based number of the optimizer step just taken, got {step!r}")
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be the number of optimizer steps the run plans (>= 1), got "
                         f"{total_steps!r}")
    for module in model.modules():
        method = module.__dict__.get("residual_method")
        if method is not None:
            method.after_optimizer_step(module, step, total_steps)
