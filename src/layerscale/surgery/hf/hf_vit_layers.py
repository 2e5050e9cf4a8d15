"""The residual branches of Hugging Face ViT encoder layers (``ViTLayer``, and DeiT's ``DeiTLayer``, the same layer).

A ViT layer is Pre-LN, ``x ← x + F(norm(x))`` twice, and each branch ends in one ``nn.Linear``, the exact place for
LayerScale (:class:`~layerscale.surgery.LayerScaledLinear`):

* transformers >= 5.9: ``attention.o_proj`` and ``mlp.fc2`` (``ViTLayer`` adds both residuals itself);
* transformers 4.x and 5.0 – 5.8: ``attention.output.dense`` and ``output.dense`` (``ViTOutput`` adds its residual
  after the dense).

Read from the wheels of transformers 5.8.0 and 5.9.0 (``models/vit/modeling_vit.py``). ``DeiTLayer`` has ViT's
layout (``models/deit/modeling_deit.py``: in the 4.x source it is marked "Copied from
transformers.models.vit.modeling_vit.ViTLayer with ViT->DeiT"; in 5.24 it has the same ``attention.o_proj`` /
``mlp.fc2``). :func:`add_layerscale
<layerscale.surgery.add_layerscale>` wraps the two outputs; the ViT block family reads their γ back.
"""

from __future__ import annotations

from typing import Callable

from torch import nn

from ..peers import loaded_table_classes
from ..scaled_linear import LayerScaledLinear

__all__ = ["HF_VIT_LAYERS", "VIT_BRANCH_OUTPUTS", "vit_layer_types", "vit_branch_outputs", "queue_hf_vit_layer"]

#: transformers module -> its layer class with the ViT layout
HF_VIT_LAYERS = {
    "transformers.models.vit.modeling_vit": "ViTLayer",
    "transformers.models.deit.modeling_deit": "DeiTLayer",
}

#: (attention output, MLP output) of a ViT layer: transformers >= 5.9, then 4.x – 5.8
VIT_BRANCH_OUTPUTS = (("attention.o_proj", "mlp.fc2"), ("attention.output.dense", "output.dense"))


def vit_layer_types() -> tuple[type, ...]:
    """The layer classes of :data:`HF_VIT_LAYERS` whose transformers module is loaded."""
    return loaded_table_classes(HF_VIT_LAYERS)


def _submodule(layer: nn.Module, path: str) -> nn.Module | None:
    try:
        return layer.get_submodule(path)
    except AttributeError:
        return None


def vit_branch_outputs(layer: nn.Module) -> tuple[str, str] | None:
    """The paths of ``layer``'s two branch output linears (the first layout of :data:`VIT_BRANCH_OUTPUTS` whose
    modules are both ``nn.Linear``, a :class:`~layerscale.surgery.LayerScaledLinear` included); ``None``: neither."""
    for paths in VIT_BRANCH_OUTPUTS:
        if all(isinstance(_submodule(layer, path), nn.Linear) for path in paths):
            return paths
    return None


def queue_hf_vit_layer(path: str, layer: nn.Module, actions: list[Callable[[float], None]]) -> bool:
    """Queue, for :func:`~layerscale.surgery.add_layerscale`, a scale on each unscaled branch output of ``layer``;
    a one-line ``ValueError`` naming the layer when it has neither layout."""
    paths = vit_branch_outputs(layer)
    if paths is None:
        layouts = " nor ".join("/".join(pair) for pair in VIT_BRANCH_OUTPUTS)
        raise ValueError(f"cannot add LayerScale to {path or '<root>'} ({type(layer).__name__}): found neither "
                         f"{layouts}")
    for name in paths:
        linear = layer.get_submodule(name)
        if isinstance(linear, LayerScaledLinear):
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = layer.get_submodule(parent_name)

        def add(value: float, parent=parent, attr=attr, linear=linear) -> None:
            setattr(parent, attr, LayerScaledLinear.wrap(linear, value))

        actions.append(add)
    return True
