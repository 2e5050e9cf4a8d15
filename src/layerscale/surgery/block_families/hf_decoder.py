"""Hugging Face causal LMs with GPT-2, Llama-family, parallel-branch (GPT-J, Phi, Cohere, GPT-NeoX, StableLM, Falcon),
OPT, BLOOM, MPT, post-norm (Gemma 2 / 3, OLMo 2 / 3, EXAONE 4), mixture-of-experts (Mixtral, Qwen MoE, OLMoE, PhiMoE,
gpt-oss, DeepSeek-V3, ERNIE 4.5 MoE, Granite MoE; prune only), hybrid (Qwen3-Next, Qwen3.5; prune only) or state-space
(Mamba, Mamba-2, Falcon Mamba, Nemotron-H; prune only) decoder layers
(:mod:`layerscale.surgery.hf.hf_decoder_layers`): the stack is the ``nn.ModuleList`` of decoder layers
(``transformer.h`` / ``model.layers``; ``gpt_neox.layers``; ``model.language_model.layers`` in a model that also
reads images, such as Gemma 3's ``Gemma3ForConditionalGeneration``).

The depth lives in the config of the text model (``num_hidden_layers``, which GPT-2's config maps to ``n_layer``;
``config.gettext_config()``, the model's own config unless it nests one for its language model), which
``save_pretrained`` writes, so plain ``from_pretrained`` builds the new depth; the per-layer config lists
(:data:`PER_LAYER_CONFIG`: ``layer_types``, sliding-window or full attention; SmolLM3's ``no_rope_layers``) are
re-ordered with the blocks. Every attention layer carries its position in the stack as ``layer_idx``, the index of
its entry in the KV cache: they are renumbered ``0 … L'−1`` so that ``generate()`` with a cache is right. GPT-2 with
``scale_attn_by_inverse_layer_idx`` scales attention by the position, so moving a block would change its function:
refused. Post-norm layers normalise each branch's output after its last linear, where a small γ would be normalised
away: they take no γ, and a new block's branch scale is its post-norms' gain (:func:`post_norm_gains`), so growing
them writes a plain folder of the source's architecture.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ...token_limits import text_config
from .base import BlockFamily, layer_stack
from ..hf.hf_decoder_layers import (branch_outputs, decoder_layer_types, hybrid_decoder_layer_types,
                                    moe_decoder_layer_types, post_norm_decoder_layer_types, post_norm_gains,
                                    state_space_decoder_layer_types)
from ..retrofit import add_layerscale

__all__ = ["HFDecoderFamily", "PER_LAYER_CONFIG"]

#: config lists with one entry per layer, which each layer reads by its index when it is built: ``layer_types``
#: (sliding-window / full attention), SmolLM3's ``no_rope_layers`` (RoPE on or off)
PER_LAYER_CONFIG = ("layer_types", "no_rope_layers")


def _stack(model: nn.Module) -> tuple[nn.Module, str] | None:
    """``(parent, name)`` of the list of decoder layers (``transformer.h`` / ``model.layers``)."""
    return layer_stack(model, decoder_layer_types() + post_norm_decoder_layer_types() + moe_decoder_layer_types()
                       + hybrid_decoder_layer_types() + state_space_decoder_layer_types())


def _edit_depth(config, old_depth: int, origin: list[int | None]) -> None:
    """Record a stack of ``len(origin)`` layers (layer ``i`` from old layer ``origin[i]``) in the text ``config``:
    its depth, and its per-layer lists (:data:`PER_LAYER_CONFIG`) re-ordered with the layers — but a list the config
    class derives from its depth (Mamba's read-only ``layer_types``), which follows it."""
    for key in PER_LAYER_CONFIG:
        derived = getattr(type(config), key, None)
        if isinstance(derived, property) and derived.fset is None:
            continue
        values = getattr(config, key, None)
        if isinstance(values, (list, tuple)) and len(values) == old_depth:
            setattr(config, key, [values[o] for o in origin])
    config.num_hidden_layers = len(origin)


def _shapes(layer: nn.Module) -> dict[str, tuple[int, ...]]:
    """A layer's parameter and persistent-buffer names and shapes, γ (``layer_scale``) aside."""
    return {key: tuple(value.shape) for key, value in layer.state_dict().items() if not key.endswith("layer_scale")}


class HFDecoderFamily(BlockFamily):
    name = "hf-decoder"

    def matches(self, model: nn.Module) -> bool:
        return hasattr(model, "config") and _stack(model) is not None

    def depth_key(self) -> str:
        return "num_hidden_layers"

    def check_editable(self, model: nn.Module) -> None:
        if getattr(model.config, "scale_attn_by_inverse_layer_idx", False):
            raise ValueError(f"{type(model).__name__} has scale_attn_by_inverse_layer_idx=True: its attention "
                             f"depends on each layer's position, so moving layers would change the function")

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        parent, name = _stack(model)
        return list(getattr(parent, name))

    def install(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        parent, name = _stack(model)
        old = getattr(parent, name)
        setattr(parent, name, nn.ModuleList(blocks))
        for index, block in enumerate(blocks):
            for module in block.modules():
                if isinstance(getattr(module, "layer_idx", None), int):
                    module.layer_idx = index  # its KV-cache slot
        _edit_depth(text_config(model.config), len(old), origin)

    def check_rebuildable(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        """The edited config, built by the model's own class on the meta device (no memory, no weights), must hold
        exactly ``blocks``: at each position the same layer class with the same parameter and buffer names and
        shapes (γ aside, which the marked type adds). A config that sets a layer's structure by its position —
        DeepSeek's first dense layers, Qwen-MoE's ``mlp_only_layers`` — would otherwise save a folder that
        ``from_pretrained`` fills with freshly initialised layers; it is refused, naming the first layer that
        differs, before anything is changed."""
        config = copy.deepcopy(model.config)
        _edit_depth(text_config(config), len(self.blocks(model)), origin)
        with torch.device("meta"):
            rebuilt = type(model)(config)
        found = _stack(rebuilt)
        layers = list(getattr(*found)) if found is not None else []
        if len(layers) != len(blocks):
            raise ValueError(f"the edited {type(model).__name__}'s config would build {len(layers)} layers, not "
                             f"{len(blocks)}; refused before writing a folder that would not load back")
        for index, (block, layer) in enumerate(zip(blocks, layers)):
            if type(block) is not type(layer) or _shapes(block) != _shapes(layer):
                raise ValueError(f"the edited {type(model).__name__}'s config would build layer {index} unlike the "
                                 f"layer moved there (old layer {origin[index]}): its config sets that layer's "
                                 f"structure by position, so a saved folder would not load back; refused")

    def add_scales(self, model: nn.Module) -> None:
        layers = self.blocks(model)
        no_output_layer = ", with no single output layer for a LayerScale γ"
        for kinds, why in ((moe_decoder_layer_types(), "'s MLP branch is a mixture of experts" + no_output_layer),
                           (hybrid_decoder_layer_types(), "'s linear-attention layers gate and normalise their output "
                                                          "inside the mixer" + no_output_layer),
                           (state_space_decoder_layer_types(), "'s mixer may apply its output projection inside a "
                                                               "fused kernel (mamba-ssm) without calling it, which "
                                                               "would bypass a LayerScale γ there")):
            found = next((layer for layer in layers if type(layer) in kinds), None)
            if found is not None:
                raise ValueError(f"{type(found).__name__}{why}: its layers can be removed (layerscale prune), not "
                                 f"grown")
        post_norm = post_norm_decoder_layer_types()
        if all(type(layer) in post_norm for layer in layers):
            return  # each branch already ends in a per-channel gain, its post-norm's
        if any(self._scale_of(layer, path) is None for layer in layers for _, path in branch_outputs(layer)):
            add_layerscale(model, 1.0)

    @staticmethod
    def _scale_of(layer: nn.Module, path: str) -> nn.Parameter | None:
        scale = getattr(layer.get_submodule(path), "layer_scale", None)
        return scale if isinstance(scale, nn.Parameter) else None

    def branch_scales(self, block: nn.Module) -> list[nn.Parameter]:
        scales = [self._scale_of(block, path) for _, path in branch_outputs(block)]
        return [s for s in scales if s is not None]

    def set_branch_scales(self, block: nn.Module, value: float) -> None:
        if type(block) not in post_norm_decoder_layer_types():
            return super().set_branch_scales(block, value)
        with torch.no_grad():
            for weight, offset in post_norm_gains(block):
                weight.fill_(value - offset)

    def reinitialise(self, model: nn.Module, block: nn.Module) -> None:
        with torch.no_grad():
            for module in block.modules():
                model._init_weights(module)
