"""Optimizer parameter groups with the no-weight-decay rule of the official CaiT / DeiT training.

The rule itself (which parameter is decayed) describes models, so it lives in :mod:`layerscale.models.no_decay`;
this module builds the optimizer groups from it."""

from __future__ import annotations

import math
import numbers

from torch import nn

from ...messages import shown_value
from ...models.no_decay import is_no_decay_parameter, is_scale_parameter

__all__ = ["param_groups", "is_no_decay_parameter", "is_scale_parameter"]

def param_groups(model: nn.Module, weight_decay: float, decay_scales: bool = False) -> list[dict]:
    """Two AdamW groups: ``[{"params": decayed, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]``.

    No decay for: LayerScale-family scales (unless ``decay_scales=True``), every 1-D parameter (norm weights,
    biases), class tokens and position embeddings — the rule of timm's optimizer factory that the official CaiT
    code trained with — and the parameters a module lists in its ``no_weight_decay_names`` (Hyper-Connections'
    static connection matrix, which the paper keeps out of weight decay). Frozen parameters
    (``requires_grad=False``) are left out. Each group also carries
    ``"param_names"`` for logging.
    """
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, numbers.Real):
        raise TypeError(f"weight_decay must be >= 0 and finite, got {type(weight_decay).__name__} "
                        f"{shown_value(weight_decay)}")
    if not math.isfinite(weight_decay) or weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}; expected a finite number")
    decay, no_decay, decay_names, no_decay_names = [], [], [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        skip = is_no_decay_parameter(model, name, param, decay_scales)
        (no_decay if skip else decay).append(param)
        (no_decay_names if skip else decay_names).append(name)
    return [
        {"params": decay, "weight_decay": float(weight_decay), "param_names": decay_names},
        {"params": no_decay, "weight_decay": 0.0, "param_names": no_decay_names},
    ]
