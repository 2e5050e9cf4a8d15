"""Stochastic depth (Huang et al. 2016): drop a whole residual branch per sample during training."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["DropPath", "drop_path_rates"]

_SCHEDULES = ("uniform", "linear")


def drop_path_rates(depth: int, rate: float, schedule: str = "linear") -> list[float]:
    """Per-block drop rates for ``depth`` blocks.

    ``linear``: block ``i`` (0-based) gets ``rate · i / (depth - 1)`` (DeiT, ViT), so the first block is never
    dropped; one block gets ``[0.0]``, as ``torch.linspace(0, rate, 1)`` gives in timm. ``uniform``: every block
    gets ``rate`` (CaiT uses the same rate in every block).
    """
    if not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"drop_path_rate must be in [0, 1), got {rate!r}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"drop_path_schedule must be one of {_SCHEDULES}, got {schedule!r}")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    if schedule == "uniform":
        return [float(rate)] * depth
    if depth == 1:
        return [0.0]
    return [float(rate) * i / (depth - 1) for i in range(depth)]


class DropPath(nn.Module):
    """Per-sample branch drop with rescaling: ``y = x · m / (1 - p)``, ``m ~ Bernoulli(1 - p)`` per sample.

    ``keep_mask(x)`` returns that factor of shape ``(B, 1, ..., 1)`` (or ``None`` when inactive) so that callers can
    fuse it into the residual update.
    """

    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= float(drop_prob) < 1.0:
            raise ValueError(f"drop_prob must be in [0, 1), got {drop_prob!r}")
        self.drop_prob = float(drop_prob)

    def keep_mask(self, x: torch.Tensor) -> torch.Tensor | None:
        if self.drop_prob == 0.0 or not self.training:
            return None
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
