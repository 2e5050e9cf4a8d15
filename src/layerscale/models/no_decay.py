"""Which parameters of a model are trained without weight decay: the rule of the official CaiT / DeiT training.

The rule describes models (their scales, tokens, embeddings, norms and biases), so it lives with them: the
optimizer groups (:func:`layerscale.param_groups`), timm's ``no_weight_decay()`` (:mod:`.timm_api`) and the Hugging
Face ``Trainer`` adapter (:mod:`layerscale.integrations.hf_trainer`, through :func:`decay_parameter_names`) all read it.
"""

from __future__ import annotations

import torch
from torch import nn

from ..layers.layer_scale import HeadScale, LayerScale, LayerScale2d, ScalarScale

__all__ = ["decay_parameter_names", "is_no_decay_parameter", "is_scale_parameter"]

_SCALE_TYPES = (LayerScale, LayerScale2d, HeadScale, ScalarScale)
#: class / distillation / register / mask tokens and position embeddings, by timm's names (``pos_embed``, ...), GPT-2's
#: (``wpe``) and Hugging Face vision models' (``embeddings.position_embeddings``, ``cls_token``, ``mask_token``,
#: ``register_tokens``, ``distillation_token``), and a learned position table (``position_embeddings.weight``)
_NO_DECAY_NAMES = ("cls_token", "pos_embed", "dist_token", "reg_token", "wpe.weight", "position_embeddings",
                   "position_embeddings.weight", "mask_token", "register_tokens", "distillation_token")


def is_scale_parameter(model: nn.Module, name: str) -> bool:
    """Whether parameter ``name`` of ``model`` is a LayerScale-family scale: ours, timm's ``gamma_1`` / ``ls1.gamma``,
    or the ``layer_scale`` that :func:`layerscale.add_layerscale` puts in a Hugging Face language model's branch
    output layers."""
    owner_name, _, leaf = name.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    if isinstance(owner, _SCALE_TYPES):
        return True
    return (leaf in ("gamma_1", "gamma_2", "lambda1", "layer_scale")
            or (leaf == "gamma" and "ls" in owner_name.split(".")[-1]))


def is_no_decay_parameter(model: nn.Module, name: str, param: torch.Tensor, decay_scales: bool = False) -> bool:
    """Whether parameter ``name`` of ``model`` is trained without weight decay.

    No decay for: LayerScale-family scales (unless ``decay_scales=True``), every other 1-D parameter (norm weights,
    biases), class / distillation / register / mask tokens and position embeddings (:data:`_NO_DECAY_NAMES`) — the
    rule of timm's optimizer factory that the official CaiT code trained with — and the parameters a module lists in
    its ``no_weight_decay_names``.
    """
    is_scale = is_scale_parameter(model, name)
    owner_name, _, leaf = name.rpartition(".")
    declared = leaf in getattr(model.get_submodule(owner_name) if owner_name else model, "no_weight_decay_names", ())
    return ((is_scale and not decay_scales) or (param.ndim <= 1 and not is_scale) or name.endswith(_NO_DECAY_NAMES)
            or declared)


def decay_parameter_names(model: nn.Module, decay_scales: bool = False) -> list[str]:
    """The names of ``model``'s parameters that are trained *with* weight decay, in ``named_parameters()`` order:
    every parameter for which :func:`is_no_decay_parameter` is false — the decay group of
    :func:`layerscale.param_groups` (frozen parameters included; an optimizer leaves them out itself). It is what the
    Hugging Face ``Trainer`` asks of ``get_decay_parameter_names``."""
    return [name for name, param in model.named_parameters()
            if not is_no_decay_parameter(model, name, param, decay_scales)]
