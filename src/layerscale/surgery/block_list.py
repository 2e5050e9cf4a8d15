"""One block-list editor for every model family: the main stack of residual blocks as a Python list.

Depth surgery in both directions — :func:`~layerscale.surgery.grow` (insert blocks) and
:func:`~layerscale.surgery.prune` (remove blocks) — edits a model through one adapter per family
(:class:`BlockFamily`, defined in :mod:`layerscale.surgery.block_families.base` and
re-exported here), so that supporting a new family is one small adapter file in
:mod:`layerscale.surgery.block_families`:

* :meth:`~BlockFamily.blocks` reads the stack in forward order;
* :meth:`~BlockFamily.install` puts an edited list in its place and records the new depth everywhere the family
  keeps it (our constructor arguments, timm's ``_model_args`` and ``feature_info``, a Hugging Face config's layer
  count and per-layer ``layer_types``, and the attention layers' ``layer_idx`` that index the KV cache);
* :meth:`~BlockFamily.add_scales` gives every block LayerScale on both branches, ``γ = 1`` where a block had none
  (``x + 1 · F(x)`` is the block's own function, exactly), so that the written model has one uniform architecture;
* :meth:`~BlockFamily.branch_scales` returns a block's γ tensors (both branches), which
  :meth:`~BlockFamily.set_branch_scales` fills when grow starts a new block (a post-norm decoder's are its
  post-norms' gains); :meth:`~BlockFamily.reinitialise` draws a block's weights afresh with the family's own
  initialisation.

Only the main stack is edited: CaiT's class-attention blocks stay as they are.
"""

from __future__ import annotations

from torch import nn

from .block_families.base import BlockFamily
from .block_families.hf_decoder import HFDecoderFamily
from .block_families.hf_encoder import HFEncoderFamily
from .block_families.ours import OurFamily
from .block_families.timm_cait import TimmCaitFamily
from .block_families.timm_vit import TimmViTFamily

__all__ = ["BlockFamily", "block_family", "FAMILY_NAMES"]


def _families() -> list[BlockFamily]:
    return [OurFamily(), TimmViTFamily(), TimmCaitFamily(), HFDecoderFamily(), HFEncoderFamily()]


#: the families the editor knows, for messages
FAMILY_NAMES = ("layerscale VisionTransformer / CaiT / GPT", "timm VisionTransformer (ViT, DeiT III)", "timm Cait",
                "Hugging Face GPT-2 and Llama-family causal LMs (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma, OLMo, "
                "Granite, SmolLM3)", "Hugging Face post-norm causal LMs (Gemma 2, Gemma 3, OLMo 2, OLMo 3, EXAONE 4)",
                "Hugging Face parallel-branch causal LMs (GPT-J, Phi, Cohere, GPT-NeoX, StableLM, Falcon)",
                "Hugging Face OPT, BLOOM and MPT causal LMs",
                "Hugging Face mixture-of-experts causal LMs, pruning only (Mixtral, Qwen2 / Qwen3 MoE, OLMoE, PhiMoE, "
                "gpt-oss, DeepSeek-V3, ERNIE 4.5 MoE, Granite MoE)",
                "Hugging Face hybrid attention / linear-attention causal LMs, pruning only (Qwen3-Next, Qwen3.5)",
                "Hugging Face state-space causal LMs, pruning only (Mamba, Mamba-2, Falcon Mamba, "
                "Nemotron-H)",
                "Hugging Face ViT, DeiT and DINOv2 (with or without registers)")


def block_family(model: nn.Module) -> BlockFamily:
    """The adapter for ``model``; ``ValueError`` naming the model's class when no family matches."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch.nn.Module, got {type(model).__name__}")
    for family in _families():
        if family.matches(model):
            return family
    raise ValueError(f"cannot edit the blocks of a {type(model).__name__}; supported: {'; '.join(FAMILY_NAMES)}")
