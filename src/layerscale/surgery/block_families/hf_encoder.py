"""Hugging Face vision transformers (``ViTModel`` / ``ViTForImageClassification``, DeiT's models with and without the
distillation head, ``Dinov2Model`` / ``Dinov2ForImageClassification``, DINOv2 with registers): the stack is the
encoder's ``nn.ModuleList`` of layers (``vit.layers`` / ``deit.layers``, ``….encoder.layer`` before transformers 5.9,
``dinov2.encoder.layer``).

Both layouts are Pre-LN, ``x ← x + F(norm(x))`` twice per layer, with the residual adds inside the layer's
``forward``. The depth lives in the config (``num_hidden_layers``), which ``save_pretrained`` writes, so plain
``from_pretrained`` builds the new depth; a backbone config's stage names (``stem``, ``stage1`` … ``stageL``) and the
stages it outputs (``out_features`` / ``out_indices``) are rewritten for the new depth, keeping "the last stage"
where the config had it. The scales:

* a ViT or DeiT layer has none of its own: :func:`~layerscale.surgery.add_layerscale` wraps each branch's output linear
  (``attention.o_proj`` / ``mlp.fc2``, or ``attention.output.dense`` / ``output.dense`` before transformers 5.9) in
  a :class:`~layerscale.surgery.LayerScaledLinear` with ``γ = 1`` (the layer's function, exactly);
* a DINOv2 layer always has LayerScale (``layer_scale1.lambda1`` / ``layer_scale2.lambda1``,
  ``modeling_dinov2.py``), so nothing is added.

Layers are re-initialised with the model's own ``_init_weights``.
"""

from __future__ import annotations

import sys

import torch
from torch import nn

from .base import BlockFamily, layer_stack
from ..hf.hf_vit_layers import HF_VIT_LAYERS, vit_branch_outputs
from ..peers import loaded_table_classes
from ..scaled_linear import LayerScaledLinear

__all__ = ["HF_ENCODER_LAYERS", "HFEncoderFamily"]

#: transformers module -> encoder layer class of every supported vision family
HF_ENCODER_LAYERS = {
    **HF_VIT_LAYERS,
    "transformers.models.dinov2.modeling_dinov2": "Dinov2Layer",
    "transformers.models.dinov2_with_registers.modeling_dinov2_with_registers": "Dinov2WithRegistersLayer",
}


def _layer_types() -> tuple[type, ...]:
    return loaded_table_classes(HF_ENCODER_LAYERS)


def _stack(model: nn.Module) -> tuple[nn.Module, str] | None:
    """``(parent, name)`` of the list of supported layers (``vit.layers`` in transformers >= 5.9,
    ``vit.encoder.layer`` before; ``dinov2.encoder.layer``)."""
    return layer_stack(model, _layer_types())


def _vit_scales(layer: nn.Module) -> list[nn.Parameter | None]:
    """The γ of a ViT layer's two branch outputs (``None`` where a branch has none)."""
    paths = vit_branch_outputs(layer)
    if paths is None:
        return [None, None]
    outputs = [layer.get_submodule(path) for path in paths]
    return [o.layer_scale if isinstance(o, LayerScaledLinear) else None for o in outputs]


def _stage_config(config: object, depth: int) -> None:
    """A backbone config's stage names and output stages for ``depth`` layers (transformers'
    ``BackboneConfigMixin``: stage ``i`` is the output of layer ``i``, ``stem`` the embeddings): the old last stage
    becomes the new last stage, a stage past the new depth the new last stage, the others stay."""
    names = getattr(config, "stage_names", None)
    if not isinstance(names, (list, tuple)):
        return
    old_last = len(names) - 1
    indices = getattr(config, "out_indices", None) or [old_last]
    absolute = [i if i >= 0 else old_last + 1 + i for i in indices]
    kept = sorted({depth if i == old_last else min(i, depth) for i in absolute})
    config.stage_names = ["stem", *(f"stage{i}" for i in range(1, depth + 1))]
    config.set_output_features_output_indices(out_features=None, out_indices=kept)


class HFEncoderFamily(BlockFamily):
    name = "hf-vision-encoder"

    def matches(self, model: nn.Module) -> bool:
        return hasattr(model, "config") and _stack(model) is not None

    def depth_key(self) -> str:
        return "num_hidden_layers"

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        parent, name = _stack(model)
        return list(getattr(parent, name))

    def install(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        parent, name = _stack(model)
        setattr(parent, name, nn.ModuleList(blocks))
        model.config.num_hidden_layers = len(blocks)
        _stage_config(model.config, len(blocks))

    def add_scales(self, model: nn.Module) -> None:
        from ..retrofit import add_layerscale

        if any(scale is None for block in self.blocks(model) for scale in self._scales(block)):
            add_layerscale(model, 1.0)

    @staticmethod
    def _scales(block: nn.Module) -> list[nn.Parameter | None]:
        if hasattr(block, "layer_scale1"):  # DINOv2: its own LayerScale on both branches
            return [getattr(getattr(block, f"layer_scale{i}"), "lambda1", None) for i in (1, 2)]
        return _vit_scales(block)

    def keep_folded_loadable(self, model: nn.Module) -> None:
        """DINOv2 always builds ``layer_scale1/2`` (``lambda1`` initialised to ``config.layerscale_value``, not
        read from the weights when a key is missing); folding replaced them by ``nn.Identity``, so they come back
        as the layer's own ``…LayerScale`` class (``Dinov2LayerScale``, ``Dinov2WithRegistersLayerScale``, from
        the layer's transformers module) with ``lambda1 = 1``: the folded function, and every key in the save."""
        for block in self.blocks(model):
            if not hasattr(block, "layer_scale1"):
                continue
            scale_class = getattr(sys.modules[type(block).__module__], f"{type(block).__name__}Scale")
            for name in ("layer_scale1", "layer_scale2"):
                if isinstance(getattr(block, name), nn.Identity):
                    ref = next(block.parameters())
                    scale = scale_class(model.config).to(device=ref.device, dtype=ref.dtype)
                    with torch.no_grad():
                        scale.lambda1.fill_(1.0)
                    setattr(block, name, scale)

    def branch_scales(self, block: nn.Module) -> list[nn.Parameter]:
        return [s for s in self._scales(block) if isinstance(s, nn.Parameter)]

    def reinitialise(self, model: nn.Module, block: nn.Module) -> None:
        with torch.no_grad():
            for module in block.modules():
                model._init_weights(module)
