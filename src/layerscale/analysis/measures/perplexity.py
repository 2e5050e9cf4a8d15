"""Loss and perplexity of a language model over evaluation windows, each with its 95 % bootstrap interval.

Every window has the same number of predicted tokens (``seq_len − 1``), so the mean token negative log-likelihood is
the mean of the per-window means, and perplexity is ``exp(mean token NLL)`` (the definition every LLM-pruning paper
reports; e.g. Gromov et al. 2024 and Men et al. 2024 report it on held-out windows). The interval resamples the
evaluation **windows** (the bootstrap of :mod:`layerscale.stats.bootstrap`: ``bootstrap_weights`` /
``bootstrap_means`` / ``percentile_interval``, the same functions as every other interval of the analysis); the
perplexity interval is ``exp`` of the loss interval's bounds, exact because ``exp`` is increasing and percentile
intervals commute with increasing maps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ...stats.bootstrap import bootstrap_means, bootstrap_weights, percentile_interval
from ..eval_data.evaluation import EvalSet, logits_of, per_example_loss, task_of

__all__ = ["Perplexity", "window_losses", "perplexity_of", "score_windows"]


@dataclass(frozen=True)
class Perplexity:
    """``loss`` (mean token NLL, nats) and ``perplexity = exp(loss)`` over ``windows`` windows of ``tokens``
    predicted tokens in all, with their ``level`` percentile intervals over windows."""

    loss: float
    loss_interval: tuple[float, float]
    perplexity: float
    perplexity_interval: tuple[float, float]
    windows: int
    tokens: int
    level: float = 0.95

    def line(self) -> str:
        """``"loss 3.210100 [3.180000, 3.240000], perplexity 24.781234 [...]"``: six decimals, so the printed values
        can be checked against another implementation to 1e-5."""
        lo, hi = self.loss_interval
        plo, phi = self.perplexity_interval
        return (f"loss {self.loss:.6f} [{lo:.6f}, {hi:.6f}], perplexity {self.perplexity:.6f} "
                f"[{plo:.6f}, {phi:.6f}]")

    def as_dict(self) -> dict:
        return {"loss": self.loss, "loss_interval": list(self.loss_interval), "perplexity": self.perplexity,
                "perplexity_interval": list(self.perplexity_interval), "windows": self.windows,
                "tokens": self.tokens, "level": self.level}


@torch.no_grad()
def window_losses(model: nn.Module, windows: EvalSet, *, device: str = "cpu", batch_size: int = 8) -> torch.Tensor:
    """``(W,)`` float64: each window's mean next-token NLL under ``model`` (eval mode, restored after)."""
    was_training = model.training
    model.eval()
    name = type(model).__name__
    try:
        losses = []
        for inputs, targets in windows.batches(batch_size):
            logits = logits_of(model(inputs.to(device)), name)
            targets = targets.to(device)
            task_of(logits, targets, name)
            losses.append(per_example_loss(logits, targets)[0].cpu())
    finally:
        model.train(was_training)
    return torch.cat(losses)


def perplexity_of(losses: torch.Tensor, tokens_per_window: int, *, level: float = 0.95, replicates: int = 1000,
                  seed: int = 0) -> Perplexity:
    """:class:`Perplexity` from per-window mean losses (module docstring)."""
    losses = torch.as_tensor(losses, dtype=torch.float64).reshape(-1)
    if losses.numel() == 0:
        raise ValueError("perplexity needs at least one evaluation window")
    mean = float(losses.mean())
    if losses.numel() >= 2:
        replicated = bootstrap_means(losses, bootstrap_weights(losses.numel(), replicates, seed))
        low, high = (float(v) for v in percentile_interval(replicated, level))
    else:
        low = high = float("nan")
    return Perplexity(mean, (low, high), math.exp(mean), (math.exp(low), math.exp(high)), int(losses.numel()),
                      int(losses.numel()) * tokens_per_window, level)


def score_windows(model: nn.Module, windows: EvalSet, *, device: str = "cpu", batch_size: int = 8,
                  level: float = 0.95, seed: int = 0) -> Perplexity:
    """:class:`Perplexity` of ``model`` on the evaluation ``windows`` (inputs ``(W, T − 1)``, next tokens
    ``(W, T − 1)``)."""
    return perplexity_of(window_losses(model, windows, device=device, batch_size=batch_size),
                         windows.targets.shape[1], level=level, seed=seed)
