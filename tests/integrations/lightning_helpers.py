"""The model and data of the Lightning callback tests: a tiny ViT on random 16×16 images of three classes."""

import torch
from torch.utils.data import DataLoader, TensorDataset

from layerscale import VisionTransformer


def tiny_vit() -> VisionTransformer:
    """A two-block ViT (16×16 images, patch 8, width 16) with LayerScale ε = 0.1, so its scales visibly move."""
    return VisionTransformer(img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=3,
                             init_value=0.1)


def random_image_loader(size: int) -> DataLoader:
    """``size`` random images and labels (the same on every call: seed 0), in batches of 4."""
    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(size, 3, 16, 16, generator=gen), torch.randint(0, 3, (size,), generator=gen))
    return DataLoader(data, batch_size=4)
