"""timm ``VisionTransformer`` (ViT, DeiT III): the stack is ``model.blocks``; the depth is recorded in the model's
``_model_args`` (which timm's ``save_for_hf`` writes to ``config.json``, so ``timm.create_model("local-dir:DIR")``
rebuilds it) and in ``feature_info`` (one entry per block, read by ``forward_intermediates``).

timm builds ``ls1`` / ``ls2`` as ``LayerScale`` only when ``init_values`` is truthy — ``init_values=0`` gives
``nn.Identity``. A source without LayerScale therefore gains timm's own ``LayerScale`` with ``γ = 1`` on its blocks
(its function exactly) and the written ``model_args`` carry ``init_values=1.0``, so that plain timm builds the
scales on every block; the loaded weights then set every γ (0 on grown blocks).
"""

from __future__ import annotations

import torch
from torch import nn

from ...models.init import init_transformer_weights
from .base import BlockFamily
from ..peers import loaded_classes

__all__ = ["TimmViTFamily"]

_VIT = "timm.models.vision_transformer"


def record_depth(model: nn.Module, depth: int, **more: object) -> None:
    """Write ``depth`` (and ``more``) into timm's reconstruction arguments and ``feature_info``."""
    args = model.__dict__.setdefault("_model_args", {})
    args.update(depth=depth, **more)
    info = getattr(model, "feature_info", None)
    if isinstance(info, list) and info and all(isinstance(i, dict) and "module" in i for i in info):
        template = info[0]
        model.feature_info = [{**template, "module": f"blocks.{i}"} for i in range(depth)]


class TimmBlocksFamily(BlockFamily):
    """A timm model whose blocks are the ``nn.Sequential`` ``model.blocks`` (ViT, DeiT III, CaiT's self-attention
    stage): read and installed the same way, with timm's reconstruction arguments kept in step."""

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.blocks)

    def install(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        model.blocks = nn.Sequential(*blocks)
        record_depth(model, len(blocks))


class TimmViTFamily(TimmBlocksFamily):
    name = "timm-vit"

    def matches(self, model: nn.Module) -> bool:
        return type(model) in loaded_classes(_VIT, "VisionTransformer")

    def check_editable(self, model: nn.Module) -> None:
        blocks = loaded_classes(_VIT, "Block")
        for i, block in enumerate(model.blocks):
            if type(block) not in blocks:
                raise ValueError(f"timm VisionTransformer blocks.{i} is a {type(block).__name__}, not timm's Block "
                                 f"(parallel / residual-post-norm variants are not supported)")

    def add_scales(self, model: nn.Module) -> None:
        from timm.layers import LayerScale

        added = False
        for block in model.blocks:
            for i, branch in ((1, block.attn.proj), (2, block.mlp.fc2)):
                if isinstance(getattr(block, f"ls{i}"), nn.Identity):
                    ref = branch.weight
                    scale = LayerScale(branch.out_features, init_values=1.0).to(device=ref.device, dtype=ref.dtype)
                    setattr(block, f"ls{i}", scale)
                    added = True
        if added:
            record_depth(model, len(model.blocks), init_values=1.0)

    def keep_folded_loadable(self, model: nn.Module) -> None:
        """Folded blocks have ``nn.Identity`` in ``ls1`` / ``ls2``, which timm builds for a falsy ``init_values``:
        the written ``model_args`` carry ``init_values=0`` (not ``None``: ``timm.create_model`` drops keyword
        arguments that are ``None``, and a ``deit3_*`` architecture would build its default LayerScale)."""
        if all(isinstance(getattr(block, f"ls{i}"), nn.Identity) for block in model.blocks for i in (1, 2)):
            record_depth(model, len(model.blocks), init_values=0)

    def branch_scales(self, block: nn.Module) -> list[nn.Parameter]:
        return [s.gamma for s in (block.ls1, block.ls2) if isinstance(getattr(s, "gamma", None), torch.Tensor)]

    def reinitialise(self, model: nn.Module, block: nn.Module) -> None:
        with torch.no_grad():  # timm's ViT init: trunc-normal(0.02) linears, zero biases, unit norms
            init_transformer_weights(block)
