"""timm CaiT blocks with their LayerScale folded away.

timm's ``LayerScaleBlock`` and ``LayerScaleBlockClassAttn`` (and the official CaiT code they copy) multiply by
bare ``gamma_1`` / ``gamma_2`` parameters inside ``forward``, so folding cannot just remove a module. Setting the
gammas to ones would keep a useless multiply per branch; instead :func:`layerscale.surgery.fold_layerscale`
replaces each block by one of these, which hold the very same sub-modules (same keys, minus ``gamma_1`` /
``gamma_2``) and compute timm's forward without the multiply.

A model written for timm to load again (``layerscale fold`` of a timm folder) needs timm's own classes back, since
timm's ``Cait`` always builds ``gamma_1`` / ``gamma_2`` (initialised to ``init_values``, not read from a missing
key): :func:`with_unit_scales` puts the same sub-modules into them with ``γ = 1``, the folded function.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FoldedCaitBlock", "FoldedCaitClassAttnBlock", "with_unit_scales"]


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


def with_unit_scales(block: _FoldedBlock, timm_class: type) -> nn.Module:
    """``block``'s sub-modules in timm's ``timm_class`` (``LayerScaleBlock`` / ``LayerScaleBlockClassAttn``) with
    ``gamma_1 = gamma_2 = 1``. The timm block is built by its own constructor on the ``meta`` device (no weights
    drawn) and every sub-module its ``forward`` reads is replaced; one it has beyond those stays on ``meta`` and
    fails at the first forward rather than compute with weights that were never loaded."""
    ref = block.mlp.fc2.weight
    dim = block.attn.proj.out_features
    with torch.device("meta"):
        new = timm_class(dim=dim, num_heads=block.attn.num_heads, init_values=1.0)
    for name in ("norm1", "attn", "drop_path", "norm2", "mlp"):
        setattr(new, name, getattr(block, name))
    new.gamma_1 = nn.Parameter(torch.ones(dim, device=ref.device, dtype=ref.dtype))
    new.gamma_2 = nn.Parameter(torch.ones(dim, device=ref.device, dtype=ref.dtype))
    return new.train(block.training)
