"""Optimizer parameter groups with the no-weight-decay rule of the official CaiT / DeiT training."""

from __future__ import annotations

import torch
from torch import nn

from ..layers.layer_scale import HeadScale, LayerScale, LayerScale2d, ScalarScale

__all__ = ["param_groups", "is_no_decay_parameter", "is_scale_parameter"]

_SCALE_TYPES = (LayerScale, LayerScale2d, HeadScale, ScalarScale)
_NO_DECAY_NAMES = ("cls_token", "pos_embed", "dist_token", "reg_token", "wpe.weight")


def is_scale_parameter(model: nn.Module, name: str) -> bool:
    """Whether parameter ``name`` of ``model`` is a LayerScale-family scale (ours, or timm's ``gamma_1``/``ls1``)."""
    owner_name, _, leaf = name.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    if isinstance(owner, _SCALE_TYPES):
        return True
    return leaf in ("gamma_1", "gamma_2", "lambda1") or (leaf == "gamma" and "ls" in owner_name.split(".")[-1])


def is_no_decay_parameter(model: nn.Module, name: str, param: torch.Tensor, decay_scales: bool = False) -> bool:
    """Whether :func:`param_groups` puts parameter ``name`` in the ``weight_decay = 0`` group (its rule, below)."""
    is_scale = is_scale_parameter(model, name)
    owner_name, _, leaf = name.rpartition(".")
    declared = leaf in getattr(model.get_submodule(owner_name) if owner_name else model, "no_weight_decay_names", ())
    return ((is_scale and not decay_scales) or (param.ndim <= 1 and not is_scale) or name.endswith(_NO_DECAY_NAMES)
            or declared)


def param_groups(model: nn.Module, weight_decay: float, decay_scales: bool = False) -> list[dict]:
    """Two AdamW groups: ``[{"params": decayed, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]``.

    No decay for: LayerScale-family scales (unless ``decay_scales=True``), every 1-D parameter (norm weights,
    biases), class tokens and position embeddings — the rule of timm's optimizer factory that the official CaiT
    code trained with — and the parameters a module lists in its ``no_weight_decay_names`` (Hyper-Connections'
    static connection matrix, which the paper keeps out of weight decay). Frozen parameters
    (``requires_grad=False``) are left out. Each group also carries
    ``"param_names"`` for logging.
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
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
