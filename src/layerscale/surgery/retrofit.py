"""Add LayerScale to the residual branches of an existing model that lacks it.

Every residual update ``x + F(x)`` becomes ``x + γ ⊙ F(x)`` (Touvron et al. 2021, CaiT, eq. 1), ``γ`` initialised
to ``init_value``: with ``init_value=1`` the model computes exactly what it did before (a pretrained model keeps its
function and gains the scales as new trainable parameters); with a small ε every block starts near the identity.
The new scales are the only new parameters: ``2 · width`` per block.
"""

from __future__ import annotations

import copy
import warnings
from typing import Callable

import torch
from torch import nn

from ..layers.block import Block, ClassAttentionBlock
from ..layers.layer_scale import LayerScale, check_init_value, init_value_for_depth
from ..models.validation import check_bool
from .folding.fold import scale_modules
from .hf.hf_decoder_layers import decoder_layer_types, queue_hf_decoder_layer
from .hf.hf_vit_layers import queue_hf_vit_layer, vit_layer_types
from .hf.hf_layerscale_config import check_markable, mark_layerscale_config
from .peers import loaded_classes
from .scaled_linear import LayerScaledLinear

__all__ = ["add_layerscale"]

_SUPPORTED = ("layerscale Block / ClassAttentionBlock (ViT, CaiT, GPT), timm VisionTransformer blocks, "
              "Hugging Face ViTLayer / DeiTLayer (ViT and DeiT models), Hugging Face causal-LM decoder layers "
              "(GPT-2, Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma, OLMo, Granite, SmolLM3; GPT-J, Phi, Cohere, "
              "GPT-NeoX, StableLM, Falcon; OPT, BLOOM, MPT)")


def _like(module: nn.Module) -> dict:
    ref = next(module.parameters(), None)
    return {} if ref is None else {"device": ref.device, "dtype": ref.dtype}


def _our_block(block: Block | ClassAttentionBlock, actions: list[Callable[[float], None]]) -> bool:
    """Queue a LayerScale for each unscaled branch; return whether the block was recognised."""
    for i in (1, 2):
        if getattr(block, f"ls{i}") is not None:
            continue
        if i == 1 and getattr(block.attn, "head_scale", None) is not None:
            continue  # per-head LayerScale already scales the attention branch
        dim = block.context.dim

        def add(value: float, b=block, name=f"ls{i}", dim=dim) -> None:
            setattr(b, name, LayerScale(dim, value, **_like(b)))

        actions.append(add)
    return True


def _timm_vit_block(block: nn.Module, actions: list[Callable[[float], None]]) -> bool:
    for i in (1, 2):
        if not isinstance(getattr(block, f"ls{i}"), nn.Identity):
            continue
        dim = (block.attn.proj if i == 1 else block.mlp.fc2).out_features

        def add(value: float, b=block, name=f"ls{i}", dim=dim) -> None:
            # key ``ls{i}.gamma``, the same as timm's own LayerScale: a timm checkpoint with init_values loads.
            setattr(b, name, LayerScale(dim, value, **_like(b)))

        actions.append(add)
    return True


#: Parameter names of LayerScale in code bases whose blocks add_layerscale does not rebuild: timm CaiT
#: (``gamma_1`` / ``gamma_2``), Hugging Face DINOv2 (``layer_scale1.lambda1``), timm / ours (``ls1.gamma``).
_SCALE_PARAMETER = ("gamma_1", "gamma_2", "lambda1", "ls1.gamma", "ls2.gamma")


def _existing_scales(model: nn.Module) -> list[str]:
    """Names of the LayerScale parameters ``model`` already has, in any of the known spellings."""
    return [name for name, _ in model.named_parameters()
            if name.split(".")[-1] in _SCALE_PARAMETER or name.endswith(_SCALE_PARAMETER[3:])]


def add_layerscale(model: nn.Module, init_value: float | None = None, *, inplace: bool = True) -> nn.Module:
    """Insert a per-channel LayerScale ``γ = init_value`` on every residual branch of ``model`` that has none.

    Recognised: our blocks built without a scale (``residual="prenorm"`` or ``ls_placement`` other than
    ``"both"``; the new modules sit in the ``ls1`` / ``ls2`` slots, keys ``ls{i}.gamma``), timm
    ``VisionTransformer`` blocks without ``init_values`` (``ls1`` / ``ls2`` become :class:`LayerScale`, key
    ``gamma`` as timm's), and Hugging Face ``ViTLayer`` / ``DeiTLayer`` (the branch's output linear becomes a
    :class:`LayerScaledLinear`, key ``layer_scale``), and Hugging Face causal-LM decoder layers — GPT-2 and the
    Llama layout (the branch's output layer ``c_proj`` / ``o_proj`` / ``down_proj`` becomes a
    :class:`LayerScaledLinear` or :class:`~layerscale.surgery.hf.scaled_conv1d.LayerScaledConv1D`, key
    ``layer_scale``; the families: :mod:`layerscale.surgery.hf.hf_decoder_layers`). ``init_value=None`` takes the
    CaiT depth rule (:func:`layerscale.init_value_for_depth`) of the number of recognised blocks — on a Hugging Face
    language model that is a ``UserWarning`` (a pretrained model almost always wants ``1.0``); ``1.0`` leaves the
    outputs unchanged exactly. On a Hugging Face model (a language model or a ViT) the config's ``model_type`` gets the
    suffix ``_layerscale`` until γ is folded, so that a plain ``from_pretrained`` of its save fails instead of
    dropping γ (:mod:`layerscale.surgery.hf.hf_layerscale_config`). ``inplace=False`` modifies a deep copy. Returns
    the model.

    Raises ``ValueError`` naming the model's class if no residual block is recognised, or if every recognised
    branch already has a scale (never a silent no-op).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"add_layerscale expects an nn.Module, got {type(model).__name__}")
    if init_value is not None:
        init_value = check_init_value(init_value)
    target = model if check_bool("inplace", inplace) else copy.deepcopy(model)
    timm_blocks = loaded_classes("timm.models.vision_transformer", "Block")
    hf_layers = vit_layer_types()
    hf_decoders = decoder_layer_types()
    actions: list[Callable[[float], None]] = []
    blocks = decoder_blocks = hf_blocks = 0
    for path, module in target.named_modules():
        if isinstance(module, (Block, ClassAttentionBlock)):
            blocks += _our_block(module, actions)
        elif type(module) in timm_blocks:
            blocks += _timm_vit_block(module, actions)
        elif type(module) in hf_layers:
            found = queue_hf_vit_layer(path, module, actions)
            blocks += found
            hf_blocks += found
        elif type(module) in hf_decoders:
            found = queue_hf_decoder_layer(path, module, actions)
            blocks += found
            decoder_blocks += found
            hf_blocks += found
    if not blocks:
        existing = _existing_scales(target)
        if existing:
            raise ValueError(f"{type(model).__name__} already has LayerScale ({len(existing)} scales, e.g. "
                             f"{existing[0]}); nothing to add")
        raise ValueError(f"add_layerscale does not recognise the residual blocks of {type(model).__name__}; "
                         f"supported: {_SUPPORTED}")
    if not actions:
        raise ValueError(f"{type(model).__name__} already has LayerScale on every residual branch "
                         f"({len(scale_modules(target))} scales found); nothing to add")
    value = init_value if init_value is not None else init_value_for_depth(blocks)
    if init_value is None and decoder_blocks and actions:
        warnings.warn(f"add_layerscale: no init_value given, so γ starts at {value:g} (the CaiT depth rule for "
                      f"{blocks} blocks) and the outputs of this {type(model).__name__} change; a pretrained "
                      f"language model usually wants init_value=1.0 (outputs unchanged)", UserWarning, stacklevel=2)
    if hf_blocks:
        check_markable(target)  # before any change: an unmarked save would load without γ through a plain class
    with torch.no_grad():
        for add in actions:
            add(value)
    if hf_blocks:
        mark_layerscale_config(target)  # a save of it cannot be loaded without γ by mistake
    return target
