"""Stochastic depth (Huang et al. 2016): drop a whole residual branch per sample during training."""

from __future__ import annotations

import numbers

import torch
from torch import nn

__all__ = ["DropPath", "check_drop_probability", "drop_path_rates"]

_SCHEDULES = ("uniform", "linear")


def check_drop_probability(name: str, value) -> float:
    """``float(value)`` when it is a real number in ``[0, 1)`` (an int, a float, a numpy scalar), else a one-line
    ``ValueError`` naming ``name``: booleans and strings such as ``"0.1"`` are refused, not converted, and NaN is
    outside the interval."""
    if isinstance(value, (bool, str, bytes)) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def drop_path_rates(depth: int, rate: float, schedule: str = "linear") -> list[float]:
    """Per-block drop rates for ``depth`` blocks.

    ``linear``: block ``i`` (0-based) gets ``rate · i / (depth - 1)`` (DeiT, ViT), so the first block is never
    dropped; one block gets ``[0.0]``, as ``torch.linspace(0, rate, 1)`` gives in timm. ``uniform``: every block
    gets ``rate`` (CaiT uses the same rate in every block). ``rate`` must be a real number in ``[0, 1)`` and
    ``depth`` an int >= 1, else a one-line ``ValueError``.
    """
    rate = check_drop_probability("drop_path_rate", rate)
    if schedule not in _SCHEDULES:
        raise ValueError(f"drop_path_schedule must be one of {_SCHEDULES}, got {schedule!r}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an int >= 1, got {depth!r}")
    if schedule == "uniform":
        return [rate] * depth
    if depth == 1:
        return [0.0]
    return [rate * i / (depth - 1) for i in range(depth)]


class DropPath(nn.Module):
    """Per-sample branch drop with rescaling: ``y = x · m / (1 - p)``, ``m ~ Bernoulli(1 - p)`` per sample.

    ``keep_mask(x)`` returns that factor of shape ``(B, 1, ..., 1)`` (or ``None`` when inactive) so that callers can
    fuse it into the residual update. ``drop_prob`` is a real number in ``[0, 1)``; when active (training, ``p > 0``)
    the input needs a batch dimension (at least 1-D), else a one-line ``ValueError``.
    """

    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        self.drop_prob = check_drop_probability("drop_prob", drop_prob)

    def keep_mask(self, x: torch.Tensor) -> torch.Tensor | None:
        if self.drop_prob == 0.0 or not self.training:
            return None
        if x.dim() == 0:
            raise ValueError("DropPath drops whole samples: expected an input with a batch dimension (B, ...), "
                             "got a 0-dimensional tensor")
        keep = 1.0 - self.drop_prob
        shape = (x.shape[0],) + (1,) * (x.dim() - 1)
        # Drawn as ``rand < keep`` (float32 uniforms) rather than ``bernoulli_(keep)``: torch.compile bakes a float
        # passed to bernoulli_ into the graph, so each block's own rate would cost a recompilation (see
        # layerscale.models.compile); a comparison keeps the rate symbolic and one graph serves every block.
        return (torch.rand(shape, device=x.device) < keep).to(x.dtype).div_(keep)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self.keep_mask(x)
        return x if mask is None else x * mask

    def extra_repr(self) -> str:
        return f"drop_prob={self.drop_prob:g}"
