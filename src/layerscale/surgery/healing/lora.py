"""LoRA adapters on a model's blocks with the ``peft`` library (the ``lora`` extra), merged back after training.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", arXiv 2106.09685, §4.1): each adapted
weight becomes ``W + (α / r) B A`` with ``A ∈ R^{r×k}`` (Kaiming-uniform), ``B ∈ R^{d×r}`` zero, so the adapted
model starts equal to the base; only ``A`` and ``B`` train. Healing a pruned LLM with LoRA is what Gromov et al.
2024 (§3.2, QLoRA healing) and the pruning literature after it do. Here every ``nn.Linear`` inside the main stack of
blocks (:func:`~layerscale.surgery.block_list.block_family`) is adapted — attention projections and MLP of timm,
Hugging Face and our models alike — and after training the adapters are merged into the weights
(``merge_and_unload``), so the healed model has its original modules and saves in its library's plain layout.

A :class:`~layerscale.surgery.scaled_linear.LayerScaledLinear` (``y = γ ⊙ (x Wᵀ + b)``, γ inside the layer:
``add_layerscale`` on a Hugging Face model) is adapted on its weight ``W``, before γ: peft would add its update
after the layer's output, ``γ ⊙ (x Wᵀ + b) + (α / r) B A x``, which no weight of that layer can hold — merging it
into ``W`` scales the update by γ, so the merged model would compute another function than the one trained.
:func:`add_lora` therefore splits each one into ``γ ⊙ linear(x)`` (:class:`ScaledBranch`, ``linear`` a plain
``nn.Linear`` sharing ``W`` and ``b``, the adapter on it) and :func:`merge_lora` joins it back into a
``LayerScaledLinear`` holding the merged ``W`` and the same γ: ``γ ⊙ (x (W + (α / r) B A)ᵀ + b)``, exactly the
adapted model.
"""

from __future__ import annotations

import torch
from torch import nn

from ..block_list import block_family
from ..scaled_linear import LayerScaledLinear

__all__ = ["lora_targets", "add_lora", "merge_lora", "ScaledBranch"]


class ScaledBranch(nn.Module):
    """``layer_scale ⊙ linear(x)``: a :class:`LayerScaledLinear` split so that an adapter on ``linear`` acts before
    γ (module docstring). ``linear`` shares the weight and bias, ``layer_scale`` is the same parameter."""

    def __init__(self, scaled: LayerScaledLinear) -> None:
        super().__init__()
        self.linear, self.layer_scale, self.init_value = scaled.unscaled(), scaled.layer_scale, scaled.init_value
        self.train(scaled.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.layer_scale

    def joined(self) -> LayerScaledLinear:
        """The ``LayerScaledLinear`` of ``linear``'s (merged) weight and bias and the same γ parameter."""
        layer = LayerScaledLinear.wrap(self.linear, self.init_value)
        layer.layer_scale = self.layer_scale
        layer.train(self.training)
        return layer


def _replace_children(model: nn.Module, kind: type, make) -> int:
    """Replace every submodule of type ``kind`` by ``make(it)``; the count replaced."""
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child) is kind]
    for parent, name, child in found:
        setattr(parent, name, make(child))
    return len(found)


def lora_targets(model: nn.Module) -> list[str]:
    """Full names of every ``nn.Linear`` inside the model's blocks (after :func:`add_lora` split a
    ``LayerScaledLinear``, its ``linear``)."""
    blocks = {id(b) for b in block_family(model).blocks(model)}
    names = []
    for name, module in model.named_modules():
        if id(module) in blocks:
            names.extend(f"{name}.{sub}" for sub, child in module.named_modules() if isinstance(child, nn.Linear))
    if not names:
        raise ValueError(f"{type(model).__name__}: no linear layer inside its blocks for LoRA to adapt")
    return names


def add_lora(model: nn.Module, rank: int = 8, alpha: float | None = None):
    """``model`` wrapped by ``peft.get_peft_model`` with rank-``rank`` adapters (``lora_alpha`` ``alpha``, default
    ``2 · rank``) on :func:`lora_targets`, no dropout; only the adapters are trainable. Each ``LayerScaledLinear``
    of ``model`` is split into a :class:`ScaledBranch` first (in place), which :func:`merge_lora` joins back."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"--lora-rank must be an integer >= 1, got {rank!r}")
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportError("LoRA healing needs peft: pip install 'torch-layerscale[lora]'") from None
    _replace_children(model, LayerScaledLinear, ScaledBranch)  # the adapter before γ (module docstring)
    config = LoraConfig(r=rank, lora_alpha=float(alpha if alpha is not None else 2 * rank), lora_dropout=0.0,
                        target_modules=lora_targets(model), bias="none")
    return get_peft_model(model, config)


def merge_lora(wrapped) -> nn.Module:
    """The base model with the adapters of ``wrapped`` (from :func:`add_lora`) merged into its weights, each
    :class:`ScaledBranch` joined back into a ``LayerScaledLinear``: the same function as the adapted model."""
    merged = wrapped.merge_and_unload()
    _replace_children(merged, ScaledBranch, ScaledBranch.joined)
    for param in merged.parameters():
        param.requires_grad_(True)
    return merged
