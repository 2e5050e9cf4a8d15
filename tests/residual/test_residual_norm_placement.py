"""Where each method puts its normalisation: Post-LN, LNS, Peri-LN, Mix-LN, DyT and the model's final norm."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from layerscale.layers import Block, ClassAttentionBlock
from layerscale.layers.dyt import DyT
from layerscale.residual.normalization.lns import DepthScaledLayerNorm

from residual_helpers import FAMILIES, all_blocks, tiny_model

FINAL_NORM = {"prenorm": nn.LayerNorm, "layerscale": nn.LayerNorm, "layerscale_head": nn.LayerNorm,
              "scalar": nn.LayerNorm, "lns": nn.LayerNorm, "periln": nn.LayerNorm, "mixln": nn.LayerNorm,
              "dyt": DyT, "postnorm": None, "deepnorm": None, "rezero": None, "skipinit": None, "tfixup": None}


def _per_token_standardised(y: torch.Tensor) -> bool:
    return (y.mean(-1).abs().max() < 1e-5 and (y.var(-1, unbiased=False) - 1).abs().max() < 1e-3).item()


@pytest.mark.parametrize("name, final", sorted(FINAL_NORM.items(), key=lambda kv: kv[0]))
def test_final_norm_follows_the_method(name, final):
    model = tiny_model("vit", name, depth=2)
    if final is None:
        assert model.norm is None and "norm.weight" not in model.state_dict()
    else:
        assert type(model.norm) is final


def test_postnorm_normalises_the_stream_after_each_branch():
    torch.manual_seed(0)
    block = Block(32, 4, residual="postnorm").eval()
    x = torch.randn(2, 5, 32) * 4
    with torch.no_grad():
        h = F.layer_norm(x + block.attn(x), (32,), eps=1e-6)
        torch.testing.assert_close(block(x), F.layer_norm(h + block.mlp(h), (32,), eps=1e-6))
        assert _per_token_standardised(block(x))
    cls = torch.randn(2, 1, 32)
    assert _per_token_standardised(ClassAttentionBlock(32, 4, residual="postnorm").eval()(x, cls).detach())


@pytest.mark.parametrize("index", [1, 4, 9, 48])
def test_lns_divides_the_normalised_input_of_block_l_by_sqrt_l(index):
    torch.manual_seed(0)
    block = Block(32, 4, residual="lns", index=index, depth=48).eval()
    assert isinstance(block.norm1, DepthScaledLayerNorm) and isinstance(block.norm2, DepthScaledLayerNorm)
    x = torch.randn(2, 5, 32) * 3
    seen = []
    block.attn.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    with torch.no_grad():
        block(x)
    torch.testing.assert_close(seen[0], F.layer_norm(x, (32,), eps=1e-6) / math.sqrt(index))
    assert {"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"} <= set(block.state_dict())


def test_lns_counts_cait_class_attention_blocks_after_the_self_attention_blocks():
    model = tiny_model("cait", "lns", depth=3)
    assert [b.norm1.layer_index for b in all_blocks(model)] == [1, 2, 3, 4, 5]
    assert type(model.norm) is nn.LayerNorm


def test_periln_normalises_each_branch_output_before_it_joins_the_stream():
    torch.manual_seed(0)
    block = Block(32, 4, residual="periln").eval()
    assert block.out_norm1.weight.eq(1).all() and block.out_norm2.weight.eq(1).all()
    outputs = []
    for norm in (block.out_norm1, block.out_norm2):
        norm.register_forward_hook(lambda module, args, out: outputs.append(out))
    x = torch.randn(2, 5, 32) * 5
    with torch.no_grad():
        y = block(x)
    assert all(_per_token_standardised(o) for o in outputs)
    torch.testing.assert_close(y, x + outputs[0] + outputs[1])


@pytest.mark.parametrize("depth", [1, 3, 4, 7, 8, 10, 48])
def test_mixln_makes_exactly_the_first_quarter_of_blocks_post_ln(depth):
    model = tiny_model("gpt", "mixln", depth=depth)
    post = [i for i, b in enumerate(model.blocks, 1) if b.post_norm1 is not None]
    assert post == list(range(1, depth // 4 + 1))
    for i, block in enumerate(model.blocks, 1):
        is_post = i <= depth // 4
        assert (block.norm1 is None, block.norm2 is None, block.post_norm2 is not None) == (is_post,) * 3
    assert type(model.norm) is nn.LayerNorm


def test_mixln_post_ln_blocks_output_a_normalised_stream():
    torch.manual_seed(0)
    model = tiny_model("vit", "mixln", depth=8).eval()
    x = torch.randn(2, 5, 32) * 3
    with torch.no_grad():
        assert _per_token_standardised(model.blocks[1](x))
        assert not _per_token_standardised(model.blocks[2](x))


def test_mixln_in_cait_counts_the_class_attention_blocks():
    model = tiny_model("cait", "mixln", depth=6)  # 6 + 2 = 8 blocks: the first two are Post-LN
    assert [b.post_norm1 is not None for b in all_blocks(model)] == [True, True] + [False] * 6


@pytest.mark.parametrize("family", FAMILIES)
def test_dyt_replaces_every_layernorm_including_the_final_one(family):
    model = tiny_model(family, "dyt", depth=3)
    assert not any(isinstance(m, nn.LayerNorm) for m in model.modules())
    dyts = [m for m in model.modules() if isinstance(m, DyT)]
    assert len(dyts) == 2 * len(all_blocks(model)) + 1 and isinstance(model.norm, DyT)
    for m in dyts:
        assert m.alpha.tolist() == [0.5] and m.weight.eq(1).all() and m.bias.eq(0).all()


def test_dyt_computes_w_tanh_ax_plus_b_and_resets():
    torch.manual_seed(0)
    layer = DyT(8)
    x = torch.randn(3, 8) * 4
    torch.testing.assert_close(layer(x), torch.tanh(0.5 * x))
    with torch.no_grad():
        layer.alpha.fill_(2.0), layer.weight.uniform_(), layer.bias.uniform_()
    torch.testing.assert_close(layer(x), layer.weight * torch.tanh(2.0 * x) + layer.bias)
    layer.reset_parameters()
    assert layer.alpha.item() == 0.5 and layer.weight.eq(1).all() and layer.bias.eq(0).all()
    assert set(layer.state_dict()) == {"alpha", "weight", "bias"}
    with pytest.raises(ValueError, match="DyT expected last dimension 8"):
        layer(torch.randn(2, 4))
    with pytest.raises(ValueError, match="alpha_init must be a finite number > 0, got 0"):
        DyT(8, alpha_init=0)


@pytest.mark.parametrize("name", ["rezero", "skipinit", "tfixup", "postnorm", "deepnorm"])
def test_methods_without_input_norm_feed_the_raw_stream_to_the_branch(name):
    block = Block(32, 4, residual=name, index=1, depth=4)
    assert block.norm1 is None and block.norm2 is None
