"""T-Fixup: no LayerNorm; Xavier-uniform weights, v / proj / fc1 / fc2 scaled by 0.67·L^(-1/4)."""

import math

import pytest
import torch
from torch import nn

from layerscale.layers import Block
from layerscale.residual.initialization.tfixup import tfixup_scale
from layerscale.residual.initialization.xavier_linear import XavierLinear

from residual_helpers import all_blocks, tiny_model

# 0.67 · L^(-1/4) written out for the depths the tests use.
FACTOR = {6: 0.4280918798450026, 24: 0.30270667120929806, 48: 0.25454495469328353, 100: 0.21187260323128143}


@pytest.mark.parametrize("depth", [6, 24, 100])
def test_named_weights_are_xavier_uniform_times_the_t_fixup_factor(depth):
    factor = FACTOR[depth]
    assert tfixup_scale(depth) == pytest.approx(factor, rel=1e-12)
    block = Block(32, 4, residual="tfixup", index=1, depth=depth)
    torch.manual_seed(7)
    for linear in (block.attn.qkv, block.attn.proj, block.mlp.fc1, block.mlp.fc2):
        linear.reset_parameters()
    # The reference: PyTorch's own Xavier-uniform (gain 1) per d×d projection, then multiplied by the factor.
    torch.manual_seed(7)
    shapes = ((32, 32, 1.0), (32, 32, 1.0), (32, 32, factor), (32, 32, factor), (128, 32, factor), (32, 128, factor))
    expected = [nn.init.xavier_uniform_(torch.empty(rows, cols)) * scale for rows, cols, scale in shapes]
    got = [block.attn.qkv.weight[:32], block.attn.qkv.weight[32:64], block.attn.qkv.weight[64:],
           block.attn.proj.weight, block.mlp.fc1.weight, block.mlp.fc2.weight]
    for name, g, e in zip(["q", "k", "v", "proj", "fc1", "fc2"], got, expected, strict=True):
        torch.testing.assert_close(g.detach(), e, msg=name)


def test_pooled_statistics_of_a_48_block_model_show_the_factor():
    torch.manual_seed(0)
    model = tiny_model("vit", "tfixup", depth=48)
    q = torch.cat([b.attn.qkv.weight[:32].flatten() for b in model.blocks])
    k = torch.cat([b.attn.qkv.weight[32:64].flatten() for b in model.blocks])
    v = torch.cat([b.attn.qkv.weight[64:].flatten() for b in model.blocks])
    proj = torch.cat([b.attn.proj.weight.flatten() for b in model.blocks])
    fc2 = torch.cat([b.mlp.fc2.weight.flatten() for b in model.blocks])
    xavier_std = math.sqrt(2 / (32 + 32))  # uniform ±√(6/(fan_in+fan_out)) has this standard deviation
    assert q.std().item() == pytest.approx(xavier_std, rel=0.03)
    assert k.std().item() == pytest.approx(xavier_std, rel=0.03)
    assert (v.std() / q.std()).item() == pytest.approx(FACTOR[48], rel=0.03)
    assert (proj.std() / q.std()).item() == pytest.approx(FACTOR[48], rel=0.03)
    assert fc2.std().item() == pytest.approx(FACTOR[48] * math.sqrt(2 / (128 + 32)), rel=0.03)
    assert all(b.attn.qkv.bias.abs().max() == 0 for b in model.blocks)


@pytest.mark.parametrize("family", ["vit", "cait", "gpt"])
def test_no_layernorm_anywhere_and_class_attention_linears_swapped_too(family):
    model = tiny_model(family, "tfixup", depth=3)
    assert not any(isinstance(m, nn.LayerNorm) for m in model.modules())
    assert model.norm is None
    total = len(all_blocks(model))
    for block in all_blocks(model):
        linears = [block.attn.proj, block.mlp.fc1, block.mlp.fc2]
        linears += [block.attn.qkv] if hasattr(block.attn, "qkv") else [block.attn.q, block.attn.k, block.attn.v]
        assert all(isinstance(linear, XavierLinear) for linear in linears)
        assert block.attn.proj.gains == pytest.approx((tfixup_scale(total),))
    if family == "cait":
        assert model.blocks_token_only[0].attn.v.gains == pytest.approx((tfixup_scale(total),))
        assert model.blocks_token_only[0].attn.k.gains == (1.0,)
        assert type(model.blocks[0].attn.proj_l) is nn.Linear  # talking-heads mixers keep CaiT's init


def test_keys_are_pre_ln_keys_without_the_norms():
    keys = set(Block(32, 4, residual="tfixup", index=1, depth=6).state_dict())
    prenorm = set(Block(32, 4, residual="prenorm").state_dict())
    assert keys == {k for k in prenorm if not k.startswith("norm")}


def test_xavier_linear_rejects_bad_gains_and_shapes():
    with pytest.raises(ValueError, match="gains must be finite numbers > 0"):
        XavierLinear(4, 4, gains=(1.0, 0.0))
    with pytest.raises(ValueError, match="out_features 4 is not divisible into 3 blocks"):
        XavierLinear(4, 4, gains=(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="distribution must be 'uniform' or 'normal'"):
        XavierLinear(4, 4, distribution="orthogonal")
