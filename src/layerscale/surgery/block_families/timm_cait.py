"""timm ``Cait``: the stack is ``model.blocks`` (``LayerScaleBlock``, with bare ``gamma_1`` / ``gamma_2``
parameters on every block, so nothing needs adding); ``blocks_token_only`` (class attention) is left alone. The
depth is recorded in ``_model_args`` and ``feature_info`` as for timm's ViT."""

from __future__ import annotations

import torch
from torch import nn

from ...models.init import init_transformer_weights
from ..peers import loaded_classes
from .timm_vit import TimmBlocksFamily

__all__ = ["TimmCaitFamily"]

_CAIT = "timm.models.cait"


class TimmCaitFamily(TimmBlocksFamily):
    name = "timm-cait"

    def matches(self, model: nn.Module) -> bool:
        return type(model) in loaded_classes(_CAIT, "Cait")

    def check_editable(self, model: nn.Module) -> None:
        for i, block in enumerate(model.blocks):
            if not all(isinstance(getattr(block, g, None), nn.Parameter) for g in ("gamma_1", "gamma_2")):
                raise ValueError(f"timm Cait blocks.{i} ({type(block).__name__}) has no gamma_1 / gamma_2")

    def add_scales(self, model: nn.Module) -> None:
        return None  # every LayerScaleBlock has gamma_1 and gamma_2

    def branch_scales(self, block: nn.Module) -> list[nn.Parameter]:
        return [block.gamma_1, block.gamma_2]

    def keep_folded_loadable(self, model: nn.Module) -> None:
        """timm's ``Cait`` always multiplies by ``gamma_1`` / ``gamma_2``: each folded block (self- and class-attention)
        goes back into timm's own class around the same sub-modules with ``γ = 1``
        (:func:`~layerscale.surgery.folding.timm_cait_blocks.with_unit_scales`), so the save holds every key timm
        builds and ``create_model`` draws none."""
        from ..folding.timm_cait_blocks import FoldedCaitBlock, FoldedCaitClassAttnBlock, with_unit_scales

        kinds = ((FoldedCaitBlock, "LayerScaleBlock"), (FoldedCaitClassAttnBlock, "LayerScaleBlockClassAttn"))
        for stack in (model.blocks, getattr(model, "blocks_token_only", ())):
            for i, block in enumerate(stack):
                for folded_type, timm_name in kinds:
                    if type(block) is folded_type:
                        stack[i] = with_unit_scales(block, loaded_classes(_CAIT, timm_name)[0])

    def reinitialise(self, model: nn.Module, block: nn.Module) -> None:
        with torch.no_grad():
            init_transformer_weights(block)
