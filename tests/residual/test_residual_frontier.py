"""The frontier methods' defining properties: Hyper-Connections and mHC start as Pre-LN, mHC's mixing is doubly
stochastic, NormFormer matches its written formula, Admin's ω is the profiled standard deviation."""

import math

import pytest
import torch
import torch.nn.functional as F

from layerscale.layers import Block
from layerscale.residual.branch_scaling.admin import AdminOmega, profile_admin
from layerscale.residual.multi_stream.hyper_connections import HyperConnections, StaticHyperConnections
from layerscale.residual.multi_stream.mhc import ManifoldConstrainedHyperConnection, ManifoldConstrainedHyperConnections

from residual_helpers import FAMILIES, all_blocks, assert_meta_construction_initialises_alike, tiny_input, tiny_model

FRONTIER = ("hc", "hc_static", "mhc", "normformer", "admin")


def _randomise_shared(model, reference):
    """Random weights for every key ``reference`` has, copied into both models (the method's own keys stay)."""
    torch.manual_seed(3)
    state = {k: torch.randn_like(v) * 0.3 for k, v in reference.state_dict().items()}
    reference.load_state_dict(state)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(".stream_mix" in k for k in missing), (missing, unexpected)


def test_hc_static_with_one_stream_equals_prenorm_given_the_same_weights():
    for family in FAMILIES:
        prenorm = tiny_model(family, "prenorm", depth=3).eval()
        hc = tiny_model(family, StaticHyperConnections(expansion_rate=1), depth=3).eval()
        _randomise_shared(hc, prenorm)
        x = tiny_input(family)
        with torch.no_grad():
            torch.testing.assert_close(hc(x), prenorm(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", [HyperConnections, StaticHyperConnections])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_hyper_connections_at_initialisation_equal_prenorm_for_any_rate(method, n, family):
    # A final norm with eps → 0 is exactly scale-invariant: the summed streams (n copies) normalise to Pre-LN's.
    prenorm = tiny_model(family, "prenorm", depth=3, norm_eps=1e-12).eval()
    hc = tiny_model(family, method(expansion_rate=n), depth=3, norm_eps=1e-12).eval()
    _randomise_shared(hc, prenorm)
    x = tiny_input(family)
    with torch.no_grad():
        torch.testing.assert_close(hc(x), prenorm(x), rtol=1e-4, atol=1e-5)
        if family != "cait":  # the summed streams are n copies of the Pre-LN stream, before the final norm
            embed = prenorm._embed_tokens(x)
            plain = prenorm.blocks(embed)
            streams = hc.blocks(hc.residual_method.expand_stream(embed))
            assert streams.shape == plain.shape[:-1] + (n, plain.shape[-1])
            torch.testing.assert_close(streams, plain.unsqueeze(-2).expand_as(streams), rtol=1e-5, atol=1e-6)


def test_hyper_connection_initialisation_is_equation_14():
    block = Block(16, 4, residual=HyperConnections(expansion_rate=3), index=2, depth=4)
    for i, k in ((1, 2), (2, 3)):  # block 2: sub-layers 2 (attention) and 3 (MLP), read stream k mod 3
        mix = getattr(block, f"stream_mix{i}")
        expected = torch.zeros(3, 4)
        expected[k % 3, 0] = 1
        expected[:, 1:] = torch.eye(3)
        assert torch.equal(mix.alpha.detach(), expected)
        assert torch.equal(mix.beta.detach(), torch.ones(3))
        assert mix.alpha_proj.abs().max() == 0 and mix.beta_proj.abs().max() == 0
        assert mix.alpha_scale.item() == pytest.approx(0.01) and mix.beta_scale.item() == pytest.approx(0.01)


def test_dynamic_hyper_connection_follows_equations_10_to_13():
    torch.manual_seed(0)
    block = Block(16, 4, residual=HyperConnections(expansion_rate=2), index=1, depth=2)
    mix = block.stream_mix1
    with torch.no_grad():
        for p in mix.parameters():
            p.copy_(torch.randn_like(p))
    H = torch.randn(2, 5, 2, 16)
    h0, carried, beta = mix.read(H)
    Hn = (H - H.mean(-1, keepdim=True)) / torch.sqrt(H.var(-1, unbiased=False, keepdim=True) + 1e-5)
    B = mix.beta_scale * torch.tanh(Hn @ mix.beta_proj) + mix.beta                                  # Eq. 11
    Am = mix.alpha_scale * torch.tanh(Hn @ mix.alpha_proj[:, :1]) + mix.alpha[:, :1]                # Eq. 12
    Ar = mix.alpha_scale * torch.tanh(Hn @ mix.alpha_proj[:, 1:]) + mix.alpha[:, 1:]                # Eq. 13
    torch.testing.assert_close(h0, (Am.transpose(-1, -2) @ H).squeeze(-2))                          # Eq. 3
    torch.testing.assert_close(carried, Ar.transpose(-1, -2) @ H)                                    # Eq. 4
    y = torch.randn(2, 5, 16)
    torch.testing.assert_close(mix.write(carried, beta, y), B.unsqueeze(-1) * y.unsqueeze(-2) + carried)  # Eq. 5


def test_every_mhc_mixing_matrix_is_doubly_stochastic_at_every_step(monkeypatch):
    recorded = []
    original = ManifoldConstrainedHyperConnection.mappings

    def recording(self, stream):
        pre, post, res = original(self, stream)
        recorded.append((pre.detach(), post.detach(), res.detach()))
        return pre, post, res

    monkeypatch.setattr(ManifoldConstrainedHyperConnection, "mappings", recording)
    torch.manual_seed(0)
    model = tiny_model("vit", "mhc", depth=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-2)
    x, target = tiny_input("vit", batch=4), torch.tensor([0, 1, 2, 0])
    for step in range(6):
        recorded.clear()
        loss = F.cross_entropy(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        assert len(recorded) == 4  # 2 blocks × 2 branches
        for pre, post, res in recorded:
            assert res.min() >= 0 and pre.min() >= 0 and post.min() >= 0 and post.max() <= 2
            torch.testing.assert_close(res.sum(-1), torch.ones_like(res.sum(-1)), atol=1e-5, rtol=0)
            torch.testing.assert_close(res.sum(-2), torch.ones_like(res.sum(-2)), atol=1e-5, rtol=0)
    # ... and the dynamic part has moved: the matrices now differ from token to token.
    assert any(res.flatten(0, -3).std(0).max() > 0 for _, _, res in recorded)


def test_mhc_starts_as_prenorm_and_follows_equations_7_and_8():
    prenorm = tiny_model("gpt", "prenorm", depth=2, norm_eps=1e-12).eval()
    mhc = tiny_model("gpt", "mhc", depth=2, norm_eps=1e-12).eval()
    _randomise_shared(mhc, prenorm)
    x = tiny_input("gpt")
    with torch.no_grad():
        torch.testing.assert_close(mhc(x), prenorm(x), rtol=1e-4, atol=1e-5)
    torch.manual_seed(1)
    mix = ManifoldConstrainedHyperConnection(8, 3, layer_index=4)
    with torch.no_grad():
        for p in mix.parameters():
            p.copy_(torch.randn_like(p))
    H = torch.randn(5, 3, 8)
    flat = H.flatten(-2)
    xn = flat / torch.sqrt(flat.square().mean(-1, keepdim=True) + 1e-6)
    raw = xn @ mix.phi
    pre = torch.sigmoid(mix.gate[0] * raw[:, :3] + mix.bias[:3])
    post = 2 * torch.sigmoid(mix.gate[1] * raw[:, 3:6] + mix.bias[3:6])
    m = torch.exp(mix.gate[2] * raw[:, 6:] + mix.bias[6:]).view(5, 3, 3)
    for _ in range(20):
        m = m / m.sum(-2, keepdim=True)
        m = m / m.sum(-1, keepdim=True)
    got = mix.mappings(H)
    for a, b in zip(got, (pre, post, m)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    h, carried, weights = mix.read(H)
    torch.testing.assert_close(h, (pre.unsqueeze(-1) * H).sum(-2))
    torch.testing.assert_close(carried, m @ H)


def test_normformer_head_scale_starts_at_one_and_the_block_matches_the_formula():
    torch.manual_seed(0)
    block = Block(16, 4, residual="normformer", index=1, depth=2).eval()
    assert torch.equal(block.attn.head_scale.gamma.detach(), torch.ones(4))
    assert block.attn.proj.bias is not None  # fairseq's out_proj keeps its bias
    assert isinstance(block.out_norm1, torch.nn.LayerNorm) and block.out_norm2 is None
    assert block.mlp.mid_norm.normalized_shape == (64,)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    x = torch.randn(2, 5, 16)

    def ln(t, norm):
        return F.layer_norm(t, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    a = block.attn
    q, k, v = a.qkv(ln(x, block.norm1)).view(2, 5, 3, 4, 4).permute(2, 0, 3, 1, 4)
    heads = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1) @ v                 # (B, H, N, d_h)
    heads = heads * a.head_scale.gamma.view(1, 4, 1, 1)                              # Concat(γ_h h_h)
    x1 = x + ln(a.proj(heads.transpose(1, 2).reshape(2, 5, 16)), block.out_norm1)   # x + LN(HeadScaleMHA(LN(x)))
    m = block.mlp
    x2 = x1 + m.fc2(ln(F.gelu(m.fc1(ln(x1, block.norm2))), m.mid_norm))              # x + W₂ LN(GELU(W₁ LN(x)))
    with torch.no_grad():
        torch.testing.assert_close(block(x), x2, rtol=1e-5, atol=1e-5)


def _admin_by_hand(model, batch):
    """Admin's recursion written out over our ViT: ω₁ = 1, ω_{i+1} = √(Var[ω_i x] + Var[F_i(x)])."""
    h = model._embed_tokens(batch)
    ratio, omegas = 1.0, []
    for block in model.blocks:
        for i, fn in ((1, block.attn), (2, block.mlp)):
            y = fn(h)
            omegas.append(ratio)
            variance_in = (h * ratio).double().var(unbiased=False).item()
            new_ratio = math.sqrt(variance_in + y.double().var(unbiased=False).item())
            h = getattr(block, f"post_norm{i}")(h * ratio + y)
            ratio = new_ratio
    return omegas


def test_admin_omega_equals_the_profiled_standard_deviations():
    torch.manual_seed(0)
    model = tiny_model("vit", "admin", depth=3)
    batch = torch.randn(6, 3, 8, 8)
    with torch.no_grad():
        expected = _admin_by_hand(model, batch)
    got = profile_admin(model, batch)
    assert got == pytest.approx(expected, rel=1e-6)
    skips = [getattr(b, f"skip{i}") for b in model.blocks for i in (1, 2)]
    assert all(isinstance(s, AdminOmega) for s in skips)
    for skip, value in zip(skips, expected):
        torch.testing.assert_close(skip.omega.detach(), torch.full((32,), value), rtol=1e-6, atol=0)
    assert expected[0] == 1.0 and len(set(expected)) == len(expected)  # ω₁ = 1, then every sub-layer its own value


def test_admin_profiles_at_construction_reproducibly_without_touching_the_global_rng():
    torch.manual_seed(0)
    a = tiny_model("gpt", "admin", depth=2)
    torch.manual_seed(0)
    b = tiny_model("gpt", "admin", depth=2)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert a.blocks[1].skip2.omega[0].item() != 1.0  # profiled, not left at 1
    state = torch.get_rng_state()
    profile_admin(a)
    assert torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(a.blocks[1].skip2.omega, b.blocks[1].skip2.omega, rtol=0, atol=0)


def test_admin_on_the_meta_device_waits_for_the_explicit_step():
    with torch.device("meta"):
        model = tiny_model("vit", "admin", depth=2)
    with pytest.raises(ValueError, match="cannot profile Admin on the meta device: materialise the model first"):
        profile_admin(model)
    model = model.to_empty(device="cpu")
    torch.manual_seed(5)
    model.reset_parameters()
    torch.manual_seed(5)
    normal = tiny_model("vit", "admin", depth=2)
    torch.manual_seed(5)
    normal.reset_parameters()
    for key, value in normal.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    with pytest.raises(ValueError, match="has no Admin skip weights to profile"):
        profile_admin(tiny_model("vit", "prenorm", depth=1))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", FRONTIER)
def test_meta_device_construction_gives_the_same_initialisation(name, family):
    assert_meta_construction_initialises_alike(family, name, depth=2)


@pytest.mark.parametrize("name", FRONTIER)
def test_frontier_methods_build_a_lone_block_and_refuse_a_placement(name):
    Block(32, 4, residual=name)
    with pytest.raises(ValueError, match=f"ls_placement='mlp' does not apply to residual '{name}'"):
        Block(32, 4, residual=name, index=1, depth=4, ls_placement="mlp")


def test_frontier_keys_leave_the_other_slots_absent():
    keys = {name: set(Block(32, 4, residual=name, index=1, depth=2).state_dict()) for name in FRONTIER}
    assert {"stream_mix1.alpha", "stream_mix2.beta_proj"} <= keys["hc"]
    assert "stream_mix1.alpha_proj" not in keys["hc_static"] and "stream_mix1.alpha" in keys["hc_static"]
    assert {"stream_mix1.phi", "stream_mix1.gate", "stream_mix2.bias", "norm1.weight"} <= keys["mhc"]
    assert {"out_norm1.weight", "attn.head_scale.gamma", "attn.proj.bias", "mlp.mid_norm.weight"} <= keys["normformer"]
    assert {"skip1.omega", "skip2.omega", "post_norm1.weight"} <= keys["admin"] and "norm1.weight" not in keys["admin"]
    prenorm = set(Block(32, 4, residual="prenorm").state_dict())
    assert not any(k.startswith(("stream_mix", "skip", "mlp.mid_norm")) for k in prenorm)


def test_bad_multi_stream_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="expansion_rate must be an int >= 1, got 0"):
        HyperConnections(expansion_rate=0)
    with pytest.raises(ValueError, match="expansion_rate must be an int >= 2, got 1"):
        ManifoldConstrainedHyperConnections(expansion_rate=1)
    with pytest.raises(ValueError, match="sinkhorn_iterations must be an int >= 1, got 0"):
        ManifoldConstrainedHyperConnections(sinkhorn_iterations=0)
    block = Block(32, 4, residual="hc")
    with pytest.raises(ValueError, match=r"hyper-connection expected a stream \(\.\.\., 4, 32\), got \(2, 5, 32\)"):
        block(torch.randn(2, 5, 32))
    assert block(torch.randn(2, 5, 4, 32)).shape == (2, 5, 4, 32)


def test_cait_class_attention_runs_on_the_class_token_streams():
    model = tiny_model("cait", "hc", depth=2)
    assert all(b.stream_mix1 is not None for b in all_blocks(model))
    assert model(tiny_input("cait")).shape == (2, 3)


def test_static_hyper_connection_weights_get_no_weight_decay():
    from layerscale.train.loop.param_groups import param_groups

    decay, no_decay = (set(g["param_names"]) for g in param_groups(tiny_model("vit", "hc", depth=1), 0.05))
    assert {"blocks.0.stream_mix1.alpha", "blocks.0.stream_mix2.beta"} <= no_decay  # static: §4 of the paper
    assert {"blocks.0.stream_mix1.alpha_proj", "blocks.0.attn.qkv.weight"} <= decay  # dynamic and the rest
    decay, no_decay = (set(g["param_names"]) for g in param_groups(tiny_model("vit", "mhc", depth=1), 0.05))
    assert "blocks.0.stream_mix1.phi" in decay and "blocks.0.stream_mix1.bias" in no_decay


@pytest.mark.parametrize("name", ["hc", "hc_static", "mhc"])
def test_block_diagnostics_refuse_multi_stream_methods_naming_them(name):
    from layerscale.diagnostics import find_blocks

    with pytest.raises(ValueError, match=f"the multi-stream residual '{name}' is not supported by the block "
                                         f"diagnostics"):
        find_blocks(tiny_model("gpt", name, depth=1))
    assert len(find_blocks(tiny_model("gpt", "admin", depth=2))) == 2  # single-stream frontier methods are fine
