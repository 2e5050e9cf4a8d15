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


def block_streams(blocks, run) -> list[torch.Tensor]:
    """``x^(0) … x^(L)`` of ``blocks`` (the input of the first block, positional or ``hidden_states=``, then each
    block's output, the first element of a tuple) from one call of ``run()`` with hooks, as float64; the hooks are
    removed afterwards."""
    seen: list[torch.Tensor] = []

    def stream(value):
        return (value[0] if isinstance(value, (tuple, list)) else value).detach().double()

    handles = [blocks[0].register_forward_pre_hook(
        lambda m, a, k: seen.append(stream(a[0] if a else k["hidden_states"])), with_kwargs=True)]
    handles += [b.register_forward_hook(lambda m, a, out: seen.append(stream(out))) for b in blocks]
    try:
        with torch.no_grad():
            run()
    finally:
        for h in handles:
            h.remove()
    return seen


def hooked_streams(model: nn.Module, inputs: torch.Tensor) -> list[torch.Tensor]:
    """:func:`block_streams` of ``model.blocks`` on one plain forward of ``inputs``."""
    return block_streams(model.blocks, lambda: model(inputs))
