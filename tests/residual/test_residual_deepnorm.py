"""DeepNorm: α = (2L)^(1/4) on the skip path, β = (8L)^(-1/4) Xavier-normal gain on v, proj, fc1, fc2; Post-LN."""

import math

import pytest
import torch
from torch import nn

from layerscale.layers import Block, ClassAttentionBlock
from layerscale.residual.branch_scaling.deepnorm import deepnorm_alpha, deepnorm_beta
from layerscale.residual.initialization.xavier_linear import XavierLinear

from residual_helpers import all_blocks, tiny_model

# (2L)^(1/4) and (8L)^(-1/4) written out, so that a wrong formula in the code cannot pass by agreeing with itself.
PUBLISHED = {6: (1.8612097182041991, 0.37991784282579627), 24: (2.6321480259049848, 0.2686424829558855),
             100: (3.7606030930863934, 0.1880301546543197)}


@pytest.mark.parametrize("depth", sorted(PUBLISHED))
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_alpha_and_beta_equal_the_published_formulas(depth, kind):
    alpha, beta = PUBLISHED[depth]
    assert deepnorm_alpha(depth) == pytest.approx(alpha, rel=1e-12)
    assert deepnorm_beta(depth) == pytest.approx(beta, rel=1e-12)
    block = Block(32, 4, residual="deepnorm", index=depth, depth=depth, kind=kind)
    assert block.skip_weight == pytest.approx(alpha, rel=1e-12)
    assert block.attn.qkv.gains == pytest.approx((1.0, 1.0, beta))
    for linear in (block.attn.proj, block.mlp.fc1, block.mlp.fc2):
        assert isinstance(linear, XavierLinear) and linear.gains == pytest.approx((beta,))
        assert linear.distribution == "normal"


@pytest.mark.parametrize("depth", sorted(PUBLISHED))
def test_weights_are_xavier_normal_with_gain_beta_and_qk_untouched_by_beta(depth):
    _, beta = PUBLISHED[depth]
    block = Block(32, 4, residual="deepnorm", index=1, depth=depth)
    torch.manual_seed(123)
    for linear in (block.attn.qkv, block.attn.proj, block.mlp.fc1, block.mlp.fc2):
        linear.reset_parameters()
    torch.manual_seed(123)
    expected = []
    for rows, fan_in, gain in ((32, 32, 1.0), (32, 32, 1.0), (32, 32, beta), (32, 32, beta), (128, 32, beta),
                               (32, 128, beta)):
        std = math.sqrt(2.0 / (fan_in + rows))
        expected.append(torch.empty(rows, fan_in).normal_(0.0, std) * gain)
    got = [block.attn.qkv.weight[:32], block.attn.qkv.weight[32:64], block.attn.qkv.weight[64:],
           block.attn.proj.weight, block.mlp.fc1.weight, block.mlp.fc2.weight]
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g.detach(), e)
    for linear in (block.attn.qkv, block.attn.proj, block.mlp.fc1, block.mlp.fc2):
        assert linear.bias.abs().max().item() == 0


def test_pooled_weight_statistics_match_beta():
    torch.manual_seed(0)
    depth = 24
    model = tiny_model("vit", "deepnorm", depth=depth)
    beta = PUBLISHED[depth][1]
    q = torch.cat([b.attn.qkv.weight[:32].flatten() for b in model.blocks])
    v = torch.cat([b.attn.qkv.weight[64:].flatten() for b in model.blocks])
    fc1 = torch.cat([b.mlp.fc1.weight.flatten() for b in model.blocks])
    assert q.std().item() == pytest.approx(math.sqrt(2 / 64), rel=0.03)
    assert (v.std() / q.std()).item() == pytest.approx(beta, rel=0.03)
    assert fc1.std().item() == pytest.approx(beta * math.sqrt(2 / (32 + 128)), rel=0.03)


def test_deepnorm_is_post_ln_with_alpha_on_the_stream():
    torch.manual_seed(0)
    block = Block(32, 4, residual="deepnorm", index=1, depth=6).eval()
    x = torch.randn(2, 5, 32)
    alpha = PUBLISHED[6][0]
    with torch.no_grad():
        h = nn.functional.layer_norm(alpha * x + block.attn(x), (32,), eps=1e-6)
        expected = nn.functional.layer_norm(alpha * h + block.mlp(h), (32,), eps=1e-6)
        torch.testing.assert_close(block(x), expected)
    assert block.norm1 is None and block.norm2 is None


@pytest.mark.parametrize("family", ["vit", "cait", "gpt"])
def test_models_use_their_total_block_count_and_end_without_a_final_norm(family):
    model = tiny_model(family, "deepnorm", depth=4)
    blocks = all_blocks(model)
    total = len(blocks)
    assert [b.skip_weight for b in blocks] == pytest.approx([deepnorm_alpha(total)] * total)
    assert model.norm is None
    if family == "cait":
        ca = model.blocks_token_only[0]
        assert isinstance(ca, ClassAttentionBlock)
        assert ca.attn.v.gains == pytest.approx((deepnorm_beta(total),)) and ca.attn.q.gains == (1.0,)


def test_keys_are_those_of_post_ln():
    keys = set(Block(32, 4, residual="deepnorm", index=1, depth=6).state_dict())
    assert keys == set(Block(32, 4, residual="postnorm").state_dict())
