"""Image to patch tokens: a ``patch × patch`` convolution with stride ``patch`` (ViT, Dosovitskiy et al. 2021)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PatchEmbed"]


class PatchEmbed(nn.Module):
    """``(B, C, H, W) -> (B, (H/p)·(W/p), D)`` by a strided convolution ``proj`` (timm's key ``patch_embed.proj``).

    ``strict_img_size=True``: inputs must be ``img_size × img_size``; ``False`` (timm's ``dynamic_img_size``): any
    ``H × W`` that the patch size divides (the grid is then :meth:`feature_grid`)."""

    def __init__(self, img_size: int, patch_size: int, in_chans: int, embed_dim: int,
                 strict_img_size: bool = True) -> None:
        super().__init__()
        if img_size % patch_size != 0:
            raise ValueError(
                f"img_size {img_size} is not divisible by patch_size {patch_size}; "
                f"choose a patch_size that divides {img_size}"
            )
        self.img_size = img_size
        self.patch_size = patch_size
        self.in_chans = in_chans
        self.strict_img_size = strict_img_size
        self.grid_size = img_size // patch_size
        self.num_patches = self.grid_size**2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def feature_grid(self, x: torch.Tensor) -> tuple[int, int]:
        """The patch grid ``(H/p, W/p)`` of images ``x``."""
        return x.shape[-2] // self.patch_size, x.shape[-1] // self.patch_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.strict_img_size:
            if x.dim() != 4 or x.shape[1] != self.in_chans or x.shape[2] != self.img_size or \
                    x.shape[3] != self.img_size:
                raise ValueError(
                    f"expected images of shape (B, {self.in_chans}, {self.img_size}, {self.img_size}), "
                    f"got {tuple(x.shape)}"
                )
        elif x.dim() != 4 or x.shape[1] != self.in_chans or x.shape[2] % self.patch_size or \
                x.shape[3] % self.patch_size:
            raise ValueError(f"expected images of shape (B, {self.in_chans}, H, W) with H and W multiples of the "
                             f"patch size {self.patch_size}, got {tuple(x.shape)}")
        return self.proj(x).flatten(2).transpose(1, 2)
