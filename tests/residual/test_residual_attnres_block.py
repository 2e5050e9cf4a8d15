"""Block Attention Residuals (``residual="attnres_block"``) against the official pseudocode written out here.

Per transformer block ``j``: the attention sub-layer attends over ``blocks + [partial]``; if ``j`` starts a group
(``⌊n·L/N⌋``), ``partial`` joins ``blocks`` and restarts from the attention output, else the output is added to it;
the MLP sub-layer attends over ``blocks + [partial]`` and adds its output to ``partial``; the output layer attends
over ``blocks + [partial]`` once more (its own pseudo-query, the report's §3.2).
"""

import pytest
import torch

from layerscale.residual import get_residual
from layerscale.residual.multi_stream.attnres_block import BlockAttentionResiduals, group_starts

from residual_helpers import FAMILIES, next_token_training_losses, tiny_input, tiny_model
from test_residual_attnres import embed, key_attention, output_layer, randomised


def method(num_blocks):
    return BlockAttentionResiduals(num_blocks=num_blocks)


def reference_block(model, family, x, num_blocks):
    depth = len(model.blocks)
    starts = {n * depth // min(num_blocks, depth) for n in range(min(num_blocks, depth))}
    blocks, partial = [], embed(model, x)
    for j, block in enumerate(model.blocks):
        mix = block.stream_mix1
        h = key_attention(mix.pseudo_query, mix.key_norm_weight, blocks + [partial])
        out = block.attn(block.norm1(h))
        if j in starts:
            blocks, partial = blocks + [partial], out
        else:
            partial = partial + out
        mix = block.stream_mix2
        h = key_attention(mix.pseudo_query, mix.key_norm_weight, blocks + [partial])
        partial = partial + block.mlp(block.norm2(h))
    return output_layer(model, family, blocks + [partial])


@pytest.mark.parametrize("family", ["vit", "gpt"])
@pytest.mark.parametrize("num_blocks", [1, 2, 4, 6, 8])
def test_model_equals_the_pseudocode_in_float64(family, num_blocks):
    torch.manual_seed(0)
    model = randomised(tiny_model(family, method(num_blocks), depth=6).double().eval())
    x = tiny_input(family)
    x = x.double() if x.is_floating_point() else x
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference_block(model, family, x, num_blocks), rtol=1e-12, atol=1e-12)


def test_groups_split_the_stack_evenly():
    assert group_starts(6, 4) == [0, 1, 3, 4]
    assert group_starts(12, 4) == [0, 3, 6, 9]
    assert group_starts(48, 8) == list(range(0, 48, 6))
    assert group_starts(2, 8) == [0, 1]  # fewer blocks than groups: one group per block
    assert group_starts(5, 1) == [0]


@pytest.mark.parametrize("num_blocks", [0, -1, 2.0, True, "8"])
def test_num_blocks_must_be_a_positive_int(num_blocks):
    with pytest.raises(ValueError, match="num_blocks must be an int >= 1"):
        BlockAttentionResiduals(num_blocks=num_blocks)


def test_the_stream_keeps_at_most_N_plus_1_tensors():
    torch.manual_seed(0)
    model = tiny_model("vit", method(4), depth=12)
    stream = model.residual_method.expand_stream(embed(model, tiny_input("vit")))
    lengths = []
    for block in model.blocks:
        stream = block(stream)
        lengths.append(len(stream))
    assert max(lengths) == 4 + 1 and lengths[-1] == 5
    assert lengths == [2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5]


@pytest.mark.parametrize("family", FAMILIES)
def test_at_initialisation_every_sublayer_reads_the_mean_of_its_sources(family):
    torch.manual_seed(0)
    model = tiny_model(family, method(2), depth=4).eval()
    x = tiny_input(family)
    total = len(model.blocks) + len(getattr(model, "blocks_token_only", []))  # CaiT counts its class stage too
    starts = {n * total // 2 for n in range(2)}
    inputs = []
    hooks = [getattr(b, f"norm{i}").register_forward_pre_hook(lambda m, a: inputs.append(a[0]))
             for b in model.blocks for i in (1, 2)]
    with torch.no_grad():
        model.forward_features(x)
        for hook in hooks:
            hook.remove()
        # the sources each sub-layer sees, from the pseudocode with uniform weights
        blocks, partial, expected = [], embed(model, x), []
        for j, block in enumerate(model.blocks):
            expected.append(torch.stack(blocks + [partial]).mean(0))
            out = block.attn(block.norm1(expected[-1]))
            blocks, partial = (blocks + [partial], out) if j in starts else (blocks, partial + out)
            expected.append(torch.stack(blocks + [partial]).mean(0))
            partial = partial + block.mlp(block.norm2(expected[-1]))
    for got, want in zip(inputs, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_state_dict_keys_match_full_attnres():
    full = tiny_model("gpt", "attnres", depth=3)
    block = tiny_model("gpt", method(2), depth=3)
    assert list(full.state_dict()) == list(block.state_dict())


def test_a_few_training_steps_lower_the_loss():
    torch.manual_seed(0)
    model = tiny_model("gpt", "attnres_block", depth=4)
    losses = next_token_training_losses(model)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.8 * losses[0]


def test_registry_default_and_repr():
    assert get_residual("attnres_block").num_blocks == 8
    assert repr(method(4)) == "BlockAttentionResiduals(num_blocks=4)"


def test_a_stream_of_one_source_always_gains_a_new_one():
    """CaiT's class-attention stage starts a fresh stream mid-stack: the class token must stay a source of its own."""
    from layerscale.residual.multi_stream.attnres import DepthAttention

    mix = DepthAttention(4, starts_source=False)
    first, update = torch.randn(2, 4), torch.randn(2, 4)
    assert len(mix.write((first,), None, update)) == 2
    two = mix.write((first, update), None, update)
    assert len(two) == 2 and torch.equal(two[1], 2 * update)


@pytest.mark.parametrize("name", ["attnres", "attnres_block"])
def test_a_bfloat16_model_trains_in_bfloat16(name):
    """``model.to(torch.bfloat16)``: the depth attention computes in float32 and hands the branch norm bfloat16, as
    every other method's stream does (it returned float32, which a bfloat16 LayerNorm refuses)."""
    torch.manual_seed(0)
    model = tiny_model("vit", name, depth=4).to(torch.bfloat16)
    out = model(tiny_input("vit").to(torch.bfloat16))
    out.float().sum().backward()
    assert out.dtype == torch.bfloat16
    assert all(p.grad is not None and torch.isfinite(p.grad.float()).all() for p in model.parameters())


def test_under_autocast_a_groups_partial_sum_adds_in_float32_like_the_residual_stream():
    """The partial sum plays the residual stream inside a group: under bfloat16 autocast it adds at the embedding's
    float32, as a Pre-LN stream does, not at the branch outputs' bfloat16."""
    torch.manual_seed(0)
    model = tiny_model("vit", method(2), depth=4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        stream = model.residual_method.expand_stream(embed(model, tiny_input("vit")))
        for block in model.blocks:
            stream = block(stream)
    assert len(stream) == 3 and all(source.dtype == torch.float32 for source in stream)
