"""Tiny model builders shared by the residual-method tests (random weights, a few tokens), and a few training steps
on one of them."""

import torch
import torch.nn.functional as F

from layerscale.models import create_model

FAMILIES = ("vit", "cait", "gpt")


def tiny_model(family: str, residual, depth: int, **overrides):
    """A width-32, 4-head model of ``family``: 8×8 images in 4×4 patches, or 8 tokens of a 32-symbol vocabulary."""
    args = dict(embed_dim=32, num_heads=4, depth=depth, residual=residual)
    if family == "gpt":
        args.update(vocab_size=32, block_size=8)
    else:
        args.update(img_size=8, patch_size=4, num_classes=3)
    args.update(overrides)
    return create_model(family, **args)


def tiny_input(family: str, batch: int = 2) -> torch.Tensor:
    if family == "gpt":
        return torch.randint(0, 32, (batch, 8))
    return torch.randn(batch, 3, 8, 8)


def all_blocks(model):
    """Self-attention blocks then (CaiT) class-attention blocks, in stack order."""
    return list(model.blocks) + list(getattr(model, "blocks_token_only", []))


def tiny_model_on_meta(family: str, residual, depth: int):
    """:func:`tiny_model` built on the meta device, then given uninitialised CPU storage (``to_empty``)."""
    with torch.device("meta"):
        model = tiny_model(family, residual, depth=depth)
    return model.to_empty(device="cpu")


def assert_meta_construction_initialises_alike(family: str, residual, depth: int):
    """``reset_parameters()`` under seed 1 gives a meta-built :func:`tiny_model` exactly the weights it gives a normally
    built one (same keys, equal tensors); returns the meta-built model."""
    torch.manual_seed(0)
    normal = tiny_model(family, residual, depth=depth)
    torch.manual_seed(1)
    normal.reset_parameters()
    meta = tiny_model_on_meta(family, residual, depth)
    torch.manual_seed(1)
    meta.reset_parameters()
    expected, got = normal.state_dict(), meta.state_dict()
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    return meta


def next_token_training_losses(model, steps: int = 15, lr: float = 3e-3) -> list[float]:
    """Train the ``gpt`` :func:`tiny_model` ``model`` in place for ``steps`` Adam steps (rate ``lr``) on one fixed
    batch of 8 random 8-token sequences (generator seed 0), predicting each next token; the loss before each step."""
    tokens = torch.randint(0, 32, (8, 8), generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(tokens[:, :-1]).reshape(-1, 32), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
