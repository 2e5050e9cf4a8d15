"""Activation checkpointing per block: identical gradients, less saved memory, off outside training."""

import copy

import pytest
import torch
import torch.nn.functional as F

from layerscale.models import create_model

TINY = {
    "vit": dict(img_size=16, patch_size=4, num_classes=5, embed_dim=32, depth=3, num_heads=2),
    "cait": dict(img_size=16, patch_size=4, num_classes=5, embed_dim=32, depth=3, num_heads=2, depth_token_only=2),
    "gpt": dict(vocab_size=32, block_size=12, embed_dim=32, depth=3, num_heads=2),
}


def _batch(family):
    g = torch.Generator().manual_seed(3)
    if family == "gpt":
        tokens = torch.randint(0, 32, (3, 12), generator=g)
        return tokens, tokens.roll(-1, dims=1)
    return torch.randn(3, 3, 16, 16, generator=g), torch.randint(0, 5, (3,), generator=g)


def _loss(model, family, inputs, targets):
    logits = model(inputs)
    if family == "gpt":
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return F.cross_entropy(logits, targets)


@pytest.mark.parametrize("family", sorted(TINY))
def test_checkpointing_gives_identical_loss_and_gradients_with_dropout_and_drop_path(family):
    torch.manual_seed(0)
    plain = create_model(family, drop_rate=0.1, drop_path_rate=0.3, **TINY[family]).train()
    checkpointed = copy.deepcopy(plain)
    checkpointed.set_grad_checkpointing(True)
    inputs, targets = _batch(family)
    results = []
    for model in (plain, checkpointed):
        torch.manual_seed(7)  # same dropout and stochastic-depth draws in both
        loss = _loss(model, family, inputs, targets)
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (loss_a, grads_a), (loss_b, grads_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=0, atol=0)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], rtol=1e-6, atol=1e-7, msg=name)


@pytest.mark.parametrize("family", sorted(TINY))
def test_checkpointing_saves_less_and_only_in_training(family, saved_storages):
    params = None
    torch.manual_seed(0)
    model = create_model(family, grad_checkpointing=True, **TINY[family])
    assert model.grad_checkpointing is True
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    inputs, targets = _batch(family)

    def activation_bytes():
        saved = saved_storages(lambda: _loss(model, family, inputs, targets))
        return sum(n for ptr, n in saved.items() if ptr not in params)

    with_checkpointing = activation_bytes()
    model.set_grad_checkpointing(False)
    without = activation_bytes()
    assert with_checkpointing < without / 2
    model.set_grad_checkpointing(True)
    model.eval()  # evaluation runs the blocks directly: same saved tensors as without checkpointing
    assert activation_bytes() == pytest.approx(without, rel=0.05)


@pytest.mark.parametrize("family", sorted(TINY))
def test_grad_checkpointing_argument_is_validated(family):
    with pytest.raises(ValueError, match=r"grad_checkpointing must be True or False, got 'yes'$"):
        create_model(family, grad_checkpointing="yes", **TINY[family])
    model = create_model(family, **TINY[family])
    assert model.grad_checkpointing is False
    with pytest.raises(ValueError, match=r"grad_checkpointing must be True or False, got 1$"):
        model.set_grad_checkpointing(1)
