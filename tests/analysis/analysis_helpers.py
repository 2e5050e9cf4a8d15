"""Shared by the analysis tests: a tiny ViT sure of its own labels, and the residual stream between its blocks."""

from __future__ import annotations

import torch
from torch import nn

from layerscale.models.registry import create_model


def self_labelled_vit(depth: int, examples: int, gamma_floor: float, data_seed: int):
    """``(model, images, labels)``: a random-weight ViT (torch seed 0; width 16, 2 heads, 8×8 one-channel images in
    4×4 patches, 5 classes, in eval mode) whose every LayerScale γ is ``gamma_floor + U(0, 1)`` and whose head is
    scaled ×300, with ``examples`` random images labelled by its own sharp predictions (its loss is small, and
    removing a block flips some of them). One generator seeded ``data_seed`` draws the γ, then the images."""
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=depth,
                         num_heads=2).eval()
    g = torch.Generator().manual_seed(data_seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(gamma_floor + torch.rand(p.shape, generator=g))
        model.head.weight.mul_(300.0)
        images = torch.randn(examples, 1, 8, 8, generator=g)
        labels = model(images).argmax(-1)
    return model, images, labels


def hooked_streams(model: nn.Module, inputs: torch.Tensor) -> list[torch.Tensor]:
    """``x^(0) … x^(L)`` of ``model.blocks`` (the input of the first block, then each block's output) from one plain
    forward of ``inputs`` with hooks, as float64; the hooks are removed afterwards."""
    seen: list[torch.Tensor] = []
    handles = [model.blocks[0].register_forward_pre_hook(lambda m, a: seen.append(a[0].detach().clone()))]
    handles += [b.register_forward_hook(lambda m, a, out: seen.append(out.detach().clone())) for b in model.blocks]
    try:
        with torch.no_grad():
            model(inputs)
    finally:
        for h in handles:
            h.remove()
    return [s.double() for s in seen]
