"""Small peer models with random weights (never downloaded) for the interop tests."""

from __future__ import annotations

import torch
from torch import nn

# Small overrides applied identically to the timm model and to ours: same structure, fast on CPU.
SMALL = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, num_classes=7)


def randomize_vectors_(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give every 1-D parameter (norm weights and biases, linear biases, LayerScale γ) random values, so that an
    equality test also checks that each of them reaches the right place (initial values are ones and zeros)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() <= 1 or param.shape[0] == 1:
                param.copy_(0.5 + 0.3 * torch.randn(param.shape, generator=gen))
    return model


def images(batch: int = 2, size: int = 32, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


def timm_model(name: str, **overrides) -> nn.Module:
    import timm

    torch.manual_seed(0)
    return randomize_vectors_(timm.create_model(name, pretrained=False, **{**SMALL, **overrides})).eval()
