"""timm CaiT blocks with their LayerScale folded away.

timm's ``LayerScaleBlock`` and ``LayerScaleBlockClassAttn`` (and the official CaiT code they copy) multiply by
bare ``gamma_1`` / ``gamma_2`` parameters inside ``forward``, so folding cannot just remove a module. Setting the
gammas to ones would keep a useless multiply per branch; instead :func:`layerscale.surgery.fold_layerscale`
replaces each block by one of these, which hold the very same sub-modules (same keys, minus ``gamma_1`` /
``gamma_2``) and compute timm's forward without the multiply.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FoldedCaitBlock", "FoldedCaitClassAttnBlock"]


class _FoldedBlock(nn.Module):
    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.norm1, self.attn, self.drop_path = block.norm1, block.attn, block.drop_path
        self.norm2, self.mlp = block.norm2, block.mlp
        self.train(block.training)


class FoldedCaitBlock(_FoldedBlock):
    """``x + drop_path(attn(norm1(x)))`` then ``x + drop_path(mlp(norm2(x)))`` (timm ``LayerScaleBlock``, γ folded)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class FoldedCaitClassAttnBlock(_FoldedBlock):
    """timm ``LayerScaleBlockClassAttn`` with γ folded: only the class token is updated."""

    def forward(self, x: torch.Tensor, x_cls: torch.Tensor) -> torch.Tensor:
        u = torch.cat((x_cls, x), dim=1)
        x_cls = x_cls + self.drop_path(self.attn(self.norm1(u)))
        return x_cls + self.drop_path(self.mlp(self.norm2(x_cls)))
