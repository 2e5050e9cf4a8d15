"""Our models (:class:`~layerscale.VisionTransformer`, :class:`~layerscale.CaiT`, :class:`~layerscale.GPT`): the
stack is ``model.blocks`` (CaiT's class-attention blocks are left alone), the depth is the ``depth`` constructor
argument that ``save_pretrained`` writes to ``config.json``.

Only the residual methods whose blocks do not depend on the depth can change depth exactly: ``layerscale`` (a
scale on both branches) and ``prenorm`` (``x + F(LN(x))``, which becomes ``layerscale`` with ``γ = 1`` when scales
are added). DeepNorm, Admin, T-Fixup, LNS, Mix-LN and the others build their constants from the depth and the
block's index, which a model rebuilt at another depth would compute differently: they are refused.
"""

from __future__ import annotations

import torch
from torch import nn

from ...layers.block import Block, ClassAttentionBlock
from ...layers.layer_scale import LayerScale
from ...models.cait import CaiT
from ...models.gpt import GPT
from ...models.init import init_transformer_weights
from ...models.vit import VisionTransformer
from ...residual.registry import resolve_residual
from .base import BlockFamily
from ..retrofit import add_layerscale

__all__ = ["OurFamily"]

EDITABLE_RESIDUALS = ("layerscale", "prenorm")


class OurFamily(BlockFamily):
    name = "layerscale"

    def matches(self, model: nn.Module) -> bool:
        return isinstance(model, (VisionTransformer, CaiT, GPT))

    def check_editable(self, model: nn.Module) -> None:
        if model.residual not in EDITABLE_RESIDUALS:
            raise ValueError(f"{type(model).__name__} with residual={model.residual!r}: its blocks depend on the "
                             f"depth, so a model of another depth would not compute the same function; depth "
                             f"surgery supports residual {' or '.join(EDITABLE_RESIDUALS)}")
        for i, block in enumerate(model.blocks):
            for slot in ("ls1", "ls2"):
                scale = getattr(block, slot)
                if scale is not None and type(scale) is not LayerScale:
                    raise ValueError(f"blocks.{i}.{slot} is a {type(scale).__name__}, not a per-channel "
                                     f"LayerScale; depth surgery supports residual {' or '.join(EDITABLE_RESIDUALS)}")

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.blocks)

    def install(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        model.blocks = nn.Sequential(*blocks)
        model.depth = len(blocks)
        model.__dict__["_init_kwargs"]["depth"] = len(blocks)

    def add_scales(self, model: nn.Module) -> None:
        # Every block, CaiT's class-attention blocks included: the model rebuilt from its arguments has them all.
        blocks = [m for m in model.modules() if isinstance(m, (Block, ClassAttentionBlock))]
        if any(getattr(b, slot) is None for b in blocks for slot in ("ls1", "ls2")):
            add_layerscale(model, 1.0)
        # The written model is a LayerScale model with scales on both branches of every block.
        args = model.__dict__["_init_kwargs"]
        args.update(residual="layerscale", ls_placement="both")
        model.residual = "layerscale"
        model.residual_method = resolve_residual("layerscale")

    def branch_scales(self, block: nn.Module) -> list[nn.Parameter]:
        return [s.gamma for s in (getattr(block, "ls1", None), getattr(block, "ls2", None)) if s is not None]

    def reinitialise(self, model: nn.Module, block: nn.Module) -> None:
        with torch.no_grad():
            init_transformer_weights(block)
