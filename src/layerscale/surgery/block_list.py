"""One block-list editor for every model family: the main stack of residual blocks as a Python list.

Depth surgery in both directions — :func:`~layerscale.surgery.grow` (insert blocks) and
:func:`~layerscale.surgery.prune` (remove blocks) — edits a model through one adapter per family
(:class:`BlockFamily`), so that supporting a new family is one small adapter file in
:mod:`layerscale.surgery.block_families`:

* :meth:`~BlockFamily.blocks` reads the stack in forward order;
* :meth:`~BlockFamily.install` puts an edited list in its place and records the new depth everywhere the family
  keeps it (our constructor arguments, timm's ``_model_args`` and ``feature_info``, a Hugging Face config's layer
  count and per-layer ``layer_types``, and the attention layers' ``layer_idx`` that index the KV cache);
* :meth:`~BlockFamily.add_scales` gives every block LayerScale on both branches, ``γ = 1`` where a block had none
  (``x + 1 · F(x)`` is the block's own function, exactly), so that the written model has one uniform architecture;
* :meth:`~BlockFamily.branch_scales` returns a block's γ tensors (both branches), which grow sets and the
  ``gamma`` pruning criterion reads; :meth:`~BlockFamily.reinitialise` draws a block's weights afresh with the
  family's own initialisation.

Only the main stack is edited: CaiT's class-attention blocks stay as they are.
"""

from __future__ import annotations

from torch import nn

__all__ = ["BlockFamily", "block_family", "FAMILY_NAMES"]


class BlockFamily:
    """The adapter of one model family (see the module docstring). Subclasses implement every method."""

    #: short name shown in messages and recorded in written configs
    name = "?"

    def matches(self, model: nn.Module) -> bool:
        """Whether ``model`` belongs to this family."""
        raise NotImplementedError

    def check_editable(self, model: nn.Module) -> None:
        """``ValueError`` (one line) when this model's depth cannot be changed exactly (e.g. a residual method
        whose blocks depend on the depth, which a model rebuilt at another depth would not reproduce)."""

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        """The main stack, in forward order."""
        raise NotImplementedError

    def install(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        """Make ``blocks`` the model's stack; ``origin[i]`` is the old index of new block ``i`` (for a copy, the
        block it was copied from), used for per-layer configuration such as ``layer_types``."""
        raise NotImplementedError

    def add_scales(self, model: nn.Module) -> None:
        """LayerScale on both branches of every block; ``γ = 1`` on the branches that had none."""
        raise NotImplementedError

    def branch_scales(self, block: nn.Module) -> list[nn.Parameter]:
        """The γ of both branches of ``block`` (empty when it has none)."""
        raise NotImplementedError

    def reinitialise(self, model: nn.Module, block: nn.Module) -> None:
        """Fresh weights for ``block`` with the family's initialisation."""
        raise NotImplementedError

    def depth_key(self) -> str:
        """How the family's constructor / config calls the depth (for messages and docs)."""
        return "depth"


def _families() -> list[BlockFamily]:
    from .block_families.hf_decoder import HFDecoderFamily
    from .block_families.ours import OurFamily
    from .block_families.timm_cait import TimmCaitFamily
    from .block_families.timm_vit import TimmViTFamily

    return [OurFamily(), TimmViTFamily(), TimmCaitFamily(), HFDecoderFamily()]


#: the families the editor knows, for messages
FAMILY_NAMES = ("layerscale VisionTransformer / CaiT / GPT", "timm VisionTransformer (ViT, DeiT III)", "timm Cait",
                "Hugging Face GPT-2 and Llama-family causal LMs (Llama, Mistral, Qwen2)")


def block_family(model: nn.Module) -> BlockFamily:
    """The adapter for ``model``; ``ValueError`` naming the model's class when no family matches."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch.nn.Module, got {type(model).__name__}")
    for family in _families():
        if family.matches(model):
            return family
    raise ValueError(f"cannot edit the blocks of a {type(model).__name__}; supported: {'; '.join(FAMILY_NAMES)}")
