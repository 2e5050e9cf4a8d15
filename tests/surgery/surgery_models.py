"""Small models with random weights for the surgery tests."""

from __future__ import annotations

import torch
from torch import nn

from layerscale import create_model

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=4, num_classes=5)


def randomize_vectors_(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random 1-D parameters (norm affines, biases, scales): LayerScale γ must not be a constant for the tests to
    tell a right fold from a wrong one."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() <= 1:
                param.copy_(0.5 + 0.3 * torch.randn(param.shape, generator=gen))
    return model


def ours(name: str = "vit", **overrides) -> nn.Module:
    torch.manual_seed(0)
    if name == "gpt":
        model = create_model("gpt", embed_dim=32, depth=3, num_heads=4, block_size=16, **overrides)
    else:
        model = create_model(name, **{**TINY, **overrides})
    return randomize_vectors_(model).eval()


def inputs_for(model: nn.Module, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if hasattr(model, "vocab_size"):
        return torch.randint(0, model.vocab_size, (2, 16), generator=gen)
    return torch.randn(2, 3, 32, 32, generator=gen)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
