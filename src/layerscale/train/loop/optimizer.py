"""AdamW (Loshchilov & Hutter 2019) over the project's parameter groups: no weight decay on LayerScale-family
scales, 1-D parameters, tokens and position embeddings — the rule of the official CaiT / DeiT training."""

from __future__ import annotations

import torch
from torch import nn

from ..config.schema import OptimConfig
from .param_groups import param_groups

__all__ = ["build_optimizer"]


def _fusable(params: list[torch.Tensor]) -> bool:
    """Whether torch's fused AdamW kernel takes these parameters: plain floating-point tensors (not FSDP's sharded
    ``DTensor``) on the CPU or a CUDA device."""
    return all(type(p) is nn.Parameter and p.dtype.is_floating_point and p.device.type in ("cpu", "cuda")
               for p in params)


def build_optimizer(model: nn.Module, optim: OptimConfig) -> torch.optim.AdamW:
    """``AdamW(param_groups(model, weight_decay, decay_scales), lr, betas, eps)``; empty groups are dropped.

    The update is the fused kernel (``fused=True``: one pass over all parameters instead of several element-wise ops
    per parameter; 4× faster than the per-parameter loop for a width-64 ViT on a CPU, see
    ``docs/performance.md``) where it applies (:func:`_fusable`), else torch's default implementation; the two agree
    to floating-point rounding. Build it after the model is wrapped for FSDP (which replaces parameters by sharded
    ones)."""
    groups = [g for g in param_groups(model, optim.weight_decay, optim.decay_scales) if g["params"]]
    fused = _fusable([p for g in groups for p in g["params"]]) or None
    return torch.optim.AdamW(groups, lr=optim.lr, betas=optim.betas, eps=optim.eps, fused=fused)
