"""LoRA adapters on a model's blocks with the ``peft`` library (the ``lora`` extra), merged back after training.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", arXiv 2106.09685, §4.1): each adapted
weight becomes ``W + (α / r) B A`` with ``A ∈ R^{r×k}`` (Kaiming-uniform), ``B ∈ R^{d×r}`` zero, so the adapted
model starts equal to the base; only ``A`` and ``B`` train. Healing a pruned LLM with LoRA is what Gromov et al.
2024 (§3.2, QLoRA healing) and the pruning literature after it do. Here every ``nn.Linear`` inside the main stack of
blocks (:func:`~layerscale.surgery.block_list.block_family`) is adapted — attention projections and MLP of timm,
Hugging Face and our models alike — and after training the adapters are merged into the weights
(``merge_and_unload``), so the healed model has its original modules and saves in its library's plain layout.
"""

from __future__ import annotations

from torch import nn

from ..block_list import block_family

__all__ = ["lora_targets", "add_lora", "merge_lora"]


def lora_targets(model: nn.Module) -> list[str]:
    """Full names of every ``nn.Linear`` inside the model's blocks."""
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
    ``2 · rank``) on :func:`lora_targets`, no dropout; only the adapters are trainable."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"--lora-rank must be an integer >= 1, got {rank!r}")
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportError("LoRA healing needs peft: pip install 'torch-layerscale[lora]'") from None
    config = LoraConfig(r=rank, lora_alpha=float(alpha if alpha is not None else 2 * rank), lora_dropout=0.0,
                        target_modules=lora_targets(model), bias="none")
    return get_peft_model(model, config)


def merge_lora(wrapped) -> nn.Module:
    """The base model with the adapters of ``wrapped`` (from :func:`add_lora`) merged into its weights."""
    merged = wrapped.merge_and_unload()
    for param in merged.parameters():
        param.requires_grad_(True)
    return merged
