"""Full Attention Residuals (``residual="attnres"``) against the report's equations written out here as a loop.

``h_l = Σ_{i<l} softmax_i(w_lᵀ RMSNorm(v_i)) v_i`` with ``v_0`` the embedding and one pseudo-query per sub-layer;
the head reads the same attention over every value with a pseudo-query of its own ("the final output layer
aggregates all N block representations", the report's §3.2), through the final norm (docs/methods.md, "AttnRes").
"""

import pytest
import torch
import torch.nn.functional as F

from layerscale.residual import get_residual
from layerscale.residual.multi_stream.attnres import AttentionResiduals, DepthAttention, depth_attention

from residual_helpers import FAMILIES, next_token_training_losses, tiny_input, tiny_model

EPS = 1e-6  # the key RMSNorm's eps


def key_attention(w, g, sources):
    """``Σ_i softmax_i(wᵀ (g ⊙ v_i / rms(v_i))) v_i`` by a loop over the sources."""
    logits = [(g * v / torch.sqrt(v.square().mean(-1, keepdim=True) + EPS)) @ w for v in sources]
    weights = torch.softmax(torch.stack(logits), dim=0)
    return sum(a.unsqueeze(-1) * v for a, v in zip(weights, sources))


def embed(model, x):
    return model._embed_tokens(x)


def head(model, family, hidden):
    hidden = model.norm(hidden)
    return F.linear(hidden, model.wte.weight) if family == "gpt" else model.forward_head(hidden)


def output_layer(model, family, values):
    """AttnRes's output layer: one more attention over every value (``stream_reduce``), then the head."""
    out = model.stream_reduce
    return head(model, family, key_attention(out.pseudo_query, out.key_norm_weight, values))


def reference_full(model, family, x):
    """Every sub-layer reads the attention over all earlier values and appends its own output."""
    values = [embed(model, x)]
    for block in model.blocks:
        for i, fn in ((1, block.attn), (2, block.mlp)):
            mix = getattr(block, f"stream_mix{i}")
            h = key_attention(mix.pseudo_query, mix.key_norm_weight, values)
            values.append(fn(getattr(block, f"norm{i}")(h)))
    return output_layer(model, family, values)


def randomised(model, seed=1, scale=0.3):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * scale)
    return model


@pytest.mark.parametrize("family", ["vit", "gpt"])
def test_model_equals_the_equations_in_float64(family):
    torch.manual_seed(0)
    model = randomised(tiny_model(family, "attnres", depth=3).double().eval())
    x = tiny_input(family)
    x = x.double() if x.is_floating_point() else x
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference_full(model, family, x), rtol=1e-12, atol=1e-12)


def test_depth_attention_gradients_match_autograd_in_float64():
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(6, dtype=torch.float64, generator=generator, requires_grad=True)
    sources = tuple(torch.randn(2, 3, 6, dtype=torch.float64, generator=generator, requires_grad=True) * (i + 1)
                    for i in range(4))
    sources = tuple(s.detach().requires_grad_() for s in sources)
    assert torch.autograd.gradcheck(lambda q, *v: depth_attention(q, v), (q, *sources))
    out = depth_attention(q, sources)
    torch.testing.assert_close(out, key_attention(q, torch.ones(6, dtype=torch.float64), sources),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
def test_at_initialisation_every_sublayer_reads_the_mean_of_the_earlier_values(family):
    torch.manual_seed(0)
    model = tiny_model(family, "attnres", depth=3).eval()
    x = tiny_input(family)
    inputs, outputs = [], []
    hooks = []
    for block in model.blocks:
        for i, fn in ((1, block.attn), (2, block.mlp)):
            hooks.append(getattr(block, f"norm{i}").register_forward_pre_hook(lambda m, a: inputs.append(a[0])))
            hooks.append(fn.register_forward_hook(lambda m, a, out: outputs.append(out)))
    with torch.no_grad():
        model.forward_features(x)
        values = [embed(model, x)] + outputs
    for hook in hooks:
        hook.remove()
    assert len(inputs) == 2 * len(model.blocks)
    for layer, h in enumerate(inputs, start=1):
        torch.testing.assert_close(h, torch.stack(values[:layer]).mean(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ["vit", "gpt"])
def test_at_initialisation_the_head_reads_the_mean_of_every_value_and_later_its_own_mix(family):
    """The output aggregation (``stream_reduce``) starts from the uniform average of all ``2L + 1`` values; with
    its pseudo-query moved it weighs them by its own softmax, not by the last sub-layer's."""
    torch.manual_seed(0)
    model = tiny_model(family, "attnres", depth=3).eval()
    x = tiny_input(family)
    read = []
    model.norm.register_forward_pre_hook(lambda m, a: read.append(a[0]))
    with torch.no_grad():
        stream = model.residual_method.expand_stream(embed(model, x))
        for block in model.blocks:
            stream = block(stream)
        model.forward_features(x)
        torch.testing.assert_close(read[-1], torch.stack(stream).mean(0), rtol=1e-5, atol=1e-6)
        model.stream_reduce.pseudo_query.copy_(torch.randn(model.stream_reduce.dim))
        model.forward_features(x)
    weights = model.stream_reduce.weights(stream)
    torch.testing.assert_close(read[-1], (weights.unsqueeze(-1) * torch.stack(stream)).sum(0), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(weights, torch.full_like(weights, 1 / len(stream)))


def test_weights_start_uniform_and_follow_the_pseudo_query():
    mix = DepthAttention(4)
    stream = (torch.randn(2, 4), torch.randn(2, 4) * 10, torch.randn(2, 4))
    torch.testing.assert_close(mix.weights(stream), torch.full((3, 2), 1 / 3))
    with torch.no_grad():
        mix.pseudo_query.copy_(torch.tensor([5.0, 0, 0, 0]))
    h, carried, _ = mix.read(stream)
    torch.testing.assert_close(h, (mix.weights(stream).unsqueeze(-1) * torch.stack(stream)).sum(0))
    assert carried is stream


def test_the_stream_keeps_every_value_2L_plus_1_tensors():
    torch.manual_seed(0)
    model = tiny_model("vit", "attnres", depth=4)
    stream = model.residual_method.expand_stream(embed(model, tiny_input("vit")))
    for block in model.blocks:
        stream = block(stream)
    assert isinstance(stream, tuple) and len(stream) == 2 * 4 + 1


def test_state_dict_keys_are_the_prenorm_keys_plus_two_vectors_per_sublayer_and_the_output():
    model = tiny_model("gpt", "attnres", depth=2)
    prenorm = tiny_model("gpt", "prenorm", depth=2)
    extra = set(model.state_dict()) - set(prenorm.state_dict())
    assert set(prenorm.state_dict()) <= set(model.state_dict())
    names = ("pseudo_query", "key_norm_weight")
    assert extra == {f"blocks.{b}.stream_mix{i}.{name}" for b in range(2) for i in (1, 2) for name in names} | {
        f"stream_reduce.{name}" for name in names}
    assert model.state_dict()["blocks.1.stream_mix2.pseudo_query"].shape == (32,)


def test_a_few_training_steps_lower_the_loss():
    torch.manual_seed(0)
    model = tiny_model("gpt", "attnres", depth=4)
    losses = next_token_training_losses(model)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.8 * losses[0]
    assert any(m.pseudo_query.abs().sum() > 0 for m in model.modules() if isinstance(m, DepthAttention))


def test_checkpointed_blocks_give_the_same_gradients():
    torch.manual_seed(0)
    model = randomised(tiny_model("vit", "attnres", depth=3))
    x = tiny_input("vit")
    grads = []
    for checkpointing in (False, True):
        model.zero_grad()
        model.set_grad_checkpointing(checkpointing)
        model(x).square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_registry_and_errors():
    assert isinstance(get_residual("attnres"), AttentionResiduals)
    mix = DepthAttention(4)
    with pytest.raises(ValueError, match="expand_stream"):
        mix.read(torch.randn(2, 4))
    with pytest.raises(ValueError, match="width 4"):
        mix.read((torch.randn(2, 5),))


@pytest.mark.parametrize("name", ["attnres", "attnres_block"])
def test_meta_device_construction_initialises_like_a_normal_one(name):
    from residual_helpers import assert_meta_construction_initialises_alike

    meta = assert_meta_construction_initialises_alike("vit", name, depth=3)
    assert all(m.pseudo_query.abs().sum() == 0 for m in meta.modules() if isinstance(m, DepthAttention))
