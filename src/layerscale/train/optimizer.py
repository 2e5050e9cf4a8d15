"""AdamW (Loshchilov & Hutter 2019) over the project's parameter groups: no weight decay on LayerScale-family
scales, 1-D parameters, tokens and position embeddings — the rule of the official CaiT / DeiT training."""

from __future__ import annotations

import torch
from torch import nn

from .config import OptimConfig
from .param_groups import param_groups

__all__ = ["build_optimizer"]


def build_optimizer(model: nn.Module, optim: OptimConfig) -> torch.optim.AdamW:
    """``AdamW(param_groups(model, weight_decay, decay_scales), lr, betas, eps)``; empty groups are dropped.

    Build it after the model is wrapped for FSDP (which replaces parameters by sharded ones)."""
    groups = [g for g in param_groups(model, optim.weight_decay, optim.decay_scales) if g["params"]]
    return torch.optim.AdamW(groups, lr=optim.lr, betas=optim.betas, eps=optim.eps)
