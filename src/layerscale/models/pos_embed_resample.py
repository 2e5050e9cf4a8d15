"""Absolute position embeddings resampled to another patch grid: how a model pretrained at one image size is
loaded at another (DeiT III fine-tunes at a higher resolution than it pretrains; Touvron et al. 2022, sec. 4).

The grid part of the embedding, ``(1, H·W, D)`` seen as a ``D``-channel ``H × W`` image, is resized to the new grid
by bicubic interpolation with antialiasing (in float32, then back to its dtype); prefix tokens (ViT's class-token
position) are kept as they are. This is the rule of timm's ``resample_abs_pos_embed`` that timm applies when it
loads pretrained ViT weights at another ``img_size``, so a model loaded here equals timm's (tested).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["resample_pos_embed"]


def resample_pos_embed(pos_embed: torch.Tensor, new_grid: tuple[int, int], num_prefix_tokens: int = 0) -> torch.Tensor:
    """``pos_embed`` ``(1, P + H·W, D)`` (``P = num_prefix_tokens``, a square old grid) resampled to
    ``(1, P + new_grid[0]·new_grid[1], D)``; returned unchanged when the grid already matches. A grid part that
    is not a square is a ``ValueError`` naming its token count."""
    tokens = pos_embed.shape[1] - num_prefix_tokens
    if tokens == new_grid[0] * new_grid[1] and new_grid[0] == new_grid[1]:
        return pos_embed
    side = math.isqrt(tokens)
    if side * side != tokens:
        raise ValueError(f"pos_embed has {tokens} grid tokens (after {num_prefix_tokens} prefix tokens), not a "
                         f"square grid; cannot resample it to {new_grid[0]}x{new_grid[1]}")
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    dim = grid.shape[-1]
    image = grid.float().reshape(1, side, side, dim).permute(0, 3, 1, 2)
    image = F.interpolate(image, size=tuple(new_grid), mode="bicubic", antialias=True)
    grid = image.permute(0, 2, 3, 1).reshape(1, -1, dim).to(pos_embed.dtype)
    return torch.cat([prefix, grid], dim=1)
