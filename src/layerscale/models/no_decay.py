"""Which parameters of a model are trained without weight decay: the rule of the official CaiT / DeiT training.

The rule describes models (their scales, tokens, embeddings, norms and biases), so it lives with them: the
optimizer groups (:func:`layerscale.param_groups`) and timm's ``no_weight_decay()`` (:mod:`.timm_api`) both read it.
"""

from __future__ import annotations

import torch
from torch import nn

from ..layers.layer_scale import HeadScale, LayerScale, LayerScale2d, ScalarScale

__all__ = ["is_no_decay_parameter", "is_scale_parameter"]

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
    """Whether parameter ``name`` of ``model`` is trained without weight decay.

    No decay for: LayerScale-family scales (unless ``decay_scales=True``), every other 1-D parameter (norm weights,
    biases), class / distillation / register tokens and position embeddings — the rule of timm's optimizer factory
    that the official CaiT code trained with — and the parameters a module lists in its ``no_weight_decay_names``.
    """
    is_scale = is_scale_parameter(model, name)
    owner_name, _, leaf = name.rpartition(".")
    declared = leaf in getattr(model.get_submodule(owner_name) if owner_name else model, "no_weight_decay_names", ())
    return ((is_scale and not decay_scales) or (param.ndim <= 1 and not is_scale) or name.endswith(_NO_DECAY_NAMES)
            or declared)
