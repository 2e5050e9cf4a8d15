"""ReZero and SkipInit start as exactly the identity; the LayerScale family as the identity to ε."""

import pytest
import torch

from layerscale.layers import Block, ClassAttentionBlock

from residual_helpers import all_blocks, tiny_model


@pytest.mark.parametrize("name", ["rezero", "skipinit"])
def test_zero_alpha_blocks_are_exactly_the_identity(name):
    torch.manual_seed(0)
    x, cls = torch.randn(2, 5, 32) * 3, torch.randn(2, 1, 32)
    block = Block(32, 4, residual=name).eval()
    assert torch.equal(block(x), x)
    class_block = ClassAttentionBlock(32, 4, residual=name).eval()
    assert torch.equal(class_block(x, cls), cls)
    assert block.norm1 is None and block.norm2 is None
    assert block.ls1.gamma.tolist() == [0.0] and block.ls2.gamma.tolist() == [0.0]


@pytest.mark.parametrize("name", ["rezero", "skipinit"])
@pytest.mark.parametrize("family", ["vit", "cait"])
def test_zero_alpha_models_pass_the_stream_through_every_block_unchanged(name, family):
    torch.manual_seed(0)
    model = tiny_model(family, name, depth=12, init_value=1e-6).eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        for block in model.blocks:
            assert torch.equal(block(x), x)
        cls = torch.randn(2, 1, 32)
        for block in getattr(model, "blocks_token_only", []):
            assert torch.equal(block(x, cls), cls)


@pytest.mark.parametrize("name", ["rezero", "skipinit"])
def test_zero_alpha_still_learns_alpha_first(name):
    torch.manual_seed(0)
    block = Block(32, 4, residual=name)
    block(torch.randn(2, 5, 32)).square().sum().backward()
    assert block.ls1.gamma.grad.abs().item() > 0 and block.ls2.gamma.grad.abs().item() > 0
    assert block.mlp.fc2.weight.grad.abs().max().item() == 0  # the branch learns only once α moves


@pytest.mark.parametrize("name", ["layerscale", "layerscale_head", "scalar"])
@pytest.mark.parametrize("eps", [1e-6, 1e-3])
def test_layerscale_family_is_the_identity_to_epsilon(name, eps):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 32)
    block = Block(32, 4, residual=name, init_value=eps).eval()
    reference = Block(32, 4, residual=name, init_value=1.0).eval()
    reference.load_state_dict({k: v for k, v in block.state_dict().items() if "gamma" not in k}, strict=False)
    with torch.no_grad():
        change = (block(x) - x).norm()
        unscaled = (reference(x) - x).norm()
    # Each branch is multiplied by ε, so the whole update is about ε times the unscaled one (not exactly: the MLP
    # sees the stream after the attention update).
    assert 0 < change <= 2 * eps * unscaled


def test_layerscale_cait_blocks_are_the_identity_to_epsilon_in_every_block():
    torch.manual_seed(0)
    model = tiny_model("cait", "layerscale", depth=4, init_value=1e-6).eval()
    x, cls = torch.randn(2, 4, 32), torch.randn(2, 1, 32)
    with torch.no_grad():
        for block in all_blocks(model):
            y = block(x) if block in list(model.blocks) else block(x, cls)
            base = x if block in list(model.blocks) else cls
            assert (y - base).abs().max() < 1e-4
