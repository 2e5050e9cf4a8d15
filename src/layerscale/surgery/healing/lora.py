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

The rank is bounded before anything is allocated (:func:`check_lora_rank`). ``B A`` of a ``d × k`` weight has rank at
most ``min(d, k)``, so a rank above the largest ``min(in_features, out_features)`` of the adapted linears adds
nothing but memory (``peft`` itself allocates ``A ∈ R^{r×k}``, ``B ∈ R^{d×r}`` for any ``r``: rank 10⁹ asked for 64
GB): it is refused, naming that largest rank (:func:`lora_rank_bound`). A rank between a small linear's bound and
the largest still adds to the wider linears, and is kept. Adapters whose weights, gradients and AdamW's two
moments would exceed this machine's memory (:func:`layerscale.machine.machine_memory_bytes`) are refused alike.
"""

from __future__ import annotations

import torch
from torch import nn

from ... import machine
from ..block_list import block_family
from ..scaled_linear import LayerScaledLinear

__all__ = ["lora_targets", "lora_rank_bound", "check_lora_rank", "add_lora", "merge_lora", "ScaledBranch"]

#: copies of each adapter parameter held while healing: the weight, its gradient and AdamW's two moments
_ADAPTER_COPIES = 4


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


def _targets(model: nn.Module) -> list[nn.Linear]:
    modules = dict(model.named_modules())
    return [modules[name] for name in lora_targets(model)]


def lora_rank_bound(model: nn.Module) -> int:
    """The largest rank a LoRA adapter on ``model`` can use: the largest ``min(in_features, out_features)`` of the
    linears :func:`lora_targets` names (module docstring); ``ValueError`` when there are none."""
    return max(min(linear.in_features, linear.out_features) for linear in _targets(model))


def check_lora_rank(model: nn.Module, rank: int) -> int:
    """``rank`` when it is an integer in ``[1, lora_rank_bound(model)]`` whose adapters fit this machine's memory
    (weights, gradients, AdamW's two moments); a one-line ``ValueError`` naming it otherwise. Allocates nothing and
    leaves ``model`` as it is, so :func:`add_lora` and ``layerscale prune --heal lora`` call it before any work."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"--lora-rank must be an integer >= 1, got {rank!r}")
    linears, bound = _targets(model), lora_rank_bound(model)
    if rank > bound:
        raise ValueError(f"--lora-rank {rank}: expected at most {bound}, the largest min(in_features, out_features) of "
                         f"the {len(linears)} linears of {type(model).__name__} that LoRA adapts (a higher rank adds "
                         f"nothing but memory)")
    count = rank * sum(linear.in_features + linear.out_features for linear in linears)
    needed = count * _ADAPTER_COPIES * max(linear.weight.element_size() for linear in linears)
    memory = machine.machine_memory_bytes()
    if memory is not None and needed > memory:
        raise ValueError(f"--lora-rank {rank}: the adapters ({count:,} parameters) need at least "
                         f"{needed / 2**30:,.1f} GiB (weights, gradients and AdamW's two moments), more than this "
                         f"machine's {memory / 2**30:,.1f} GiB; lower --lora-rank")
    return rank


def add_lora(model: nn.Module, rank: int = 8, alpha: float | None = None):
    """``model`` wrapped by ``peft.get_peft_model`` with rank-``rank`` adapters (``lora_alpha`` ``alpha``, default
    ``2 · rank``) on :func:`lora_targets`, no dropout; only the adapters are trainable. ``rank`` is checked first
    (:func:`check_lora_rank`: one-line ``ValueError``, the model untouched). Each ``LayerScaledLinear`` of ``model``
    is then split into a :class:`ScaledBranch` (in place), which :func:`merge_lora` joins back."""
    check_lora_rank(model, rank)
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
