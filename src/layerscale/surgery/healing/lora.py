"""LoRA adapters on a model's blocks with the ``peft`` library (the ``lora`` extra), merged back after training.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", arXiv 2106.09685, §4.1): each adapted
weight becomes ``W + (α / r) B A`` with ``A ∈ R^{r×k}`` (Kaiming-uniform), ``B ∈ R^{d×r}`` zero, so the adapted
model starts equal to the base; only ``A`` and ``B`` train. Healing a pruned LLM with LoRA is what Gromov et al.
2024 (§3.2, QLoRA healing) and the pruning literature after it do. Here every linear layer inside the main stack of
blocks (:func:`~layerscale.surgery.block_list.block_family`) is adapted — attention projections and MLP of timm,
Hugging Face and our models alike: each ``nn.Linear`` (``y = x Wᵀ + b``, ``W ∈ R^{d×k}``), and each transformers
``Conv1D`` of GPT-2 (``y = x W + b``, the same map stored transposed: ``W ∈ R^{nx×nf}``, ``k = nx``, ``d = nf``),
whose update peft adds transposed (``W + ((α / r) B A)ᵀ``, ``fan_in_fan_out=True``, set explicitly). peft's
``LoraConfig`` holds one ``fan_in_fan_out`` for all its targets, and no family's blocks mix the two kinds, so a model
whose blocks hold both is refused in one line rather than adapted under a setting peft rewrites layer by layer.
``Conv1D`` is recognised only when transformers is already imported (:func:`~layerscale.surgery.peers.loaded_classes`):
a model that holds one has imported it. After training the adapters are merged into the weights
(``merge_and_unload``), so the healed model has its original modules and saves in its library's plain layout.

A :class:`~layerscale.surgery.scaled_linear.LayerScaledLinear` (``y = γ ⊙ (x Wᵀ + b)``, γ inside the layer:
``add_layerscale`` on a Hugging Face model) and a :class:`~layerscale.surgery.hf.scaled_conv1d.LayerScaledConv1D`
(``y = γ ⊙ (x W + b)``: ``add_layerscale`` on GPT-2's ``attn.c_proj`` / ``mlp.c_proj``) are adapted on their weight
``W``, before γ: peft would add its update after the layer's output, ``γ ⊙ (x Wᵀ + b) + (α / r) B A x``, which no
weight of that layer can hold — merging it into ``W`` scales the update by γ, so the merged model would compute
another function than the one trained (peft 0.21 refuses a ``LayerScaledConv1D`` target outright). :func:`add_lora`
therefore splits each one into ``γ ⊙ linear(x)`` (:class:`ScaledBranch`, ``linear`` a plain ``nn.Linear`` or
``Conv1D`` sharing ``W`` and ``b``, the adapter on it) and :func:`merge_lora` joins it back into the same kind of
layer holding the merged ``W`` and the same γ: ``γ ⊙ (x (W + (α / r) B A)ᵀ + b)`` (``γ ⊙ (x (W + ((α / r) B A)ᵀ) +
b)`` for ``Conv1D``), exactly the adapted model.

The rank is bounded before anything is allocated (:func:`check_lora_rank`). ``B A`` of a ``d × k`` weight has rank at
most ``min(d, k)``, so a rank above the largest ``min(in_features, out_features)`` (``min(nx, nf)`` for a
``Conv1D``) of the adapted layers adds nothing but memory (``peft`` itself allocates ``A ∈ R^{r×k}``,
``B ∈ R^{d×r}`` for any ``r``: rank 10⁹ asked for 64 GB): it is refused, naming that largest rank
(:func:`lora_rank_bound`). A rank between a small layer's bound and the largest still adds to the wider layers, and is
kept. Adapters whose weights, gradients and AdamW's two moments would exceed this machine's memory
(:func:`layerscale.machine.machine_memory_bytes`) are refused alike.
"""

from __future__ import annotations

import torch
from torch import nn

from ... import machine
from ..block_list import block_family
from ..hf.scaled_conv1d import LayerScaledConv1D
from ..peers import loaded_classes
from ..scaled_linear import LayerScaledLinear

__all__ = ["lora_targets", "lora_rank_bound", "check_lora_rank", "add_lora", "merge_lora", "ScaledBranch"]

#: copies of each adapter parameter held while healing: the weight, its gradient and AdamW's two moments
_ADAPTER_COPIES = 4


def _conv1d_types() -> tuple[type, ...]:
    """transformers' ``Conv1D`` when transformers is imported (a model holding one has imported it), else ``()``."""
    return loaded_classes("transformers.pytorch_utils", "Conv1D")


class ScaledBranch(nn.Module):
    """``layer_scale ⊙ linear(x)``: a :class:`LayerScaledLinear` or :class:`LayerScaledConv1D` split so that an
    adapter on ``linear`` (a plain ``nn.Linear``, or a transformers ``Conv1D``) acts before γ (module docstring).
    ``linear`` shares the weight and bias, ``layer_scale`` is the same parameter."""

    def __init__(self, scaled: LayerScaledLinear | LayerScaledConv1D) -> None:
        super().__init__()
        self.scaled_type = type(scaled)
        self.linear = scaled.unscaled()
        self.layer_scale, self.init_value = scaled.layer_scale, scaled.init_value
        self.train(scaled.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.layer_scale

    def joined(self) -> LayerScaledLinear | LayerScaledConv1D:
        """The layer split (``LayerScaledLinear`` or ``LayerScaledConv1D``) of ``linear``'s (merged) weight and bias
        and the same γ parameter."""
        layer = self.scaled_type.wrap(self.linear, self.init_value)
        layer.layer_scale = self.layer_scale
        layer.train(self.training)
        return layer


def _replace_children(model: nn.Module, kinds: tuple[type, ...], make) -> int:
    """Replace every submodule whose type is one of ``kinds`` by ``make(it)``; the count replaced."""
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child) in kinds]
    for parent, name, child in found:
        setattr(parent, name, make(child))
    return len(found)


def _adaptable(module: nn.Module, conv_types: tuple[type, ...]) -> bool:
    """An ``nn.Linear`` (``LayerScaledLinear`` included), a transformers ``Conv1D`` or a ``LayerScaledConv1D``."""
    return isinstance(module, (nn.Linear, LayerScaledConv1D) + conv_types)


def _dims(layer: nn.Module) -> tuple[int, int]:
    """``(k, d)`` of the map ``R^k → R^d`` that ``layer`` applies: ``(in_features, out_features)`` of an
    ``nn.Linear``, ``(nx, nf)`` of a ``Conv1D`` / ``LayerScaledConv1D``."""
    if isinstance(layer, nn.Linear):
        return layer.in_features, layer.out_features
    return layer.nx, layer.nf


def _named_targets(model: nn.Module) -> dict[str, nn.Module]:
    """Every ``nn.Linear`` and transformers ``Conv1D`` inside the model's blocks, by full name, in one walk;
    ``ValueError`` when there is none."""
    blocks = {id(b) for b in block_family(model).blocks(model)}
    conv_types = _conv1d_types()
    found = {}
    for name, module in model.named_modules():
        if id(module) in blocks:
            found.update((f"{name}.{sub}", child) for sub, child in module.named_modules()
                         if _adaptable(child, conv_types))
    if not found:
        raise ValueError(f"{type(model).__name__}: no linear layer (nn.Linear or transformers Conv1D) inside its "
                         "blocks for LoRA to adapt")
    return found


def lora_targets(model: nn.Module) -> list[str]:
    """Full names of every ``nn.Linear`` and transformers ``Conv1D`` inside the model's blocks (after
    :func:`add_lora` split a ``LayerScaledLinear`` / ``LayerScaledConv1D``, its ``linear``; before, the layer)."""
    return list(_named_targets(model))


def _bound(layers) -> int:
    """The largest ``min(k, d)`` of ``layers`` (:func:`_dims`)."""
    return max(min(_dims(layer)) for layer in layers)


def _fan_in_fan_out(layers: list[nn.Module], model: nn.Module) -> bool:
    """``True`` when every layer is a ``Conv1D`` (``W`` stored ``(in, out)``), ``False`` when every one is an
    ``nn.Linear``; a one-line ``ValueError`` when the blocks mix them (module docstring)."""
    linear = sum(isinstance(layer, nn.Linear) for layer in layers)
    if 0 < linear < len(layers):
        raise ValueError(f"{type(model).__name__}: its blocks mix {linear} nn.Linear and {len(layers) - linear} "
                         "transformers Conv1D layers; LoRA healing adapts one kind per model (peft's fan_in_fan_out "
                         "is one setting for all targets)")
    return linear == 0


def lora_rank_bound(model: nn.Module) -> int:
    """The largest rank a LoRA adapter on ``model`` can use: the largest ``min(in_features, out_features)``
    (``min(nx, nf)`` of a ``Conv1D``) of the layers :func:`lora_targets` names (module docstring); ``ValueError``
    when there are none."""
    return _bound(_named_targets(model).values())


def check_lora_rank(model: nn.Module, rank: int) -> int:
    """``rank`` when it is an integer in ``[1, lora_rank_bound(model)]`` whose adapters fit this machine's memory
    (weights, gradients, AdamW's two moments); a one-line ``ValueError`` naming it otherwise, or naming a model whose
    blocks mix ``nn.Linear`` and ``Conv1D`` layers. Allocates nothing and leaves ``model`` as it is, so
    :func:`add_lora` and ``layerscale prune --heal lora`` call it before any work."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"--lora-rank must be an integer >= 1, got {rank!r}")
    layers = list(_named_targets(model).values())
    bound = _bound(layers)
    _fan_in_fan_out(layers, model)
    if rank > bound:
        raise ValueError(f"--lora-rank {rank}: expected at most {bound}, the largest min(in_features, out_features) of "
                         f"the {len(layers)} linears of {type(model).__name__} that LoRA adapts (a higher rank adds "
                         f"nothing but memory)")
    count = rank * sum(sum(_dims(layer)) for layer in layers)
    needed = count * _ADAPTER_COPIES * max(layer.weight.element_size() for layer in layers)
    memory = machine.machine_memory_bytes()
    if memory is not None and needed > memory:
        raise ValueError(f"--lora-rank {rank}: the adapters ({count:,} parameters) need at least "
                         f"{needed / 2**30:,.1f} GiB (weights, gradients and AdamW's two moments), more than this "
                         f"machine's {memory / 2**30:,.1f} GiB; lower --lora-rank")
    return rank


def add_lora(model: nn.Module, rank: int = 8, alpha: float | None = None):
    """``model`` wrapped by ``peft.get_peft_model`` with rank-``rank`` adapters (``lora_alpha`` ``alpha``, default
    ``2 · rank``) on :func:`lora_targets`, no dropout, ``fan_in_fan_out`` set when they are ``Conv1D``; only the
    adapters are trainable. ``rank`` is checked first (:func:`check_lora_rank`: one-line ``ValueError``, the model
    untouched). Each ``LayerScaledLinear`` / ``LayerScaledConv1D`` of ``model`` is then split into a
    :class:`ScaledBranch` (in place), which :func:`merge_lora` joins back."""
    check_lora_rank(model, rank)
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportError("LoRA healing needs peft: pip install 'torch-layerscale[lora]'") from None
    trainable = {id(param): param.requires_grad for param in model.parameters()}  # peft freezes all; merge restores
    # the adapter before γ (module docstring)
    _replace_children(model, (LayerScaledLinear, LayerScaledConv1D), ScaledBranch)
    targets = _named_targets(model)
    config = LoraConfig(r=rank, lora_alpha=float(alpha if alpha is not None else 2 * rank), lora_dropout=0.0,
                        target_modules=list(targets), bias="none",
                        fan_in_fan_out=_fan_in_fan_out(list(targets.values()), model))
    wrapped = get_peft_model(model, config)
    wrapped.layerscale_trainable_before_lora = trainable
    return wrapped


def merge_lora(wrapped) -> nn.Module:
    """The base model with the adapters of ``wrapped`` (from :func:`add_lora`) merged into its weights, each
    :class:`ScaledBranch` joined back into the ``LayerScaledLinear`` / ``LayerScaledConv1D`` it split: the same
    function as the adapted model. Each parameter is trainable again exactly when it was before :func:`add_lora`
    (peft froze them all): a weight the user froze stays frozen."""
    trainable = getattr(wrapped, "layerscale_trainable_before_lora", {})
    merged = wrapped.merge_and_unload()
    _replace_children(merged, (ScaledBranch,), ScaledBranch.joined)
    for param in merged.parameters():  # as before add_lora (peft froze every base weight; they are the same tensors)
        param.requires_grad_(trainable.get(id(param), True))
    return merged
