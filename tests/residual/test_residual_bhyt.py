"""BHyT (``residual="bhyt"``) against the official code's equations, written out here as a loop over blocks.

Per block, with ``σ² = mean(x²)`` of the block input, ``κ = 10`` and ``c = ‖W_O W_V‖²_F / (T·d)``:
``x' = x + Attn(γ₁ tanh(λ₁ x / (κ√(σ²+ε))))``, ``x'' = x' + MLP(γ₂ tanh(λ₂ x' / (κ√(σ² + c λ₁²/κ² + ε))))``;
``c`` again from the current weights after every step that is a multiple of ``max(1, min(1000, ⌊S/50⌋))`` of a
run of ``S`` steps (the authors' ``UpdateScalerCallback``).
"""

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from layerscale.layers import Block
from layerscale.residual import after_optimizer_step, get_residual
from layerscale.residual.normalization.bhyt import (BHyTInputNorm, BHyTPostNorm, BHyTResidual,
                                                    gain_update_interval)

from residual_helpers import tiny_input, tiny_model
from test_residual_attnres import embed, head, randomised

KAPPA, EPS = 10.0, 1e-6


def gain(block, tokens):
    d = block.attn.proj.weight.shape[0]
    w_v, w_o = block.attn.qkv.weight[2 * d:].double(), block.attn.proj.weight.double()
    return (w_o @ w_v).square().sum() / (tokens * d)


def reference_bhyt(model, family, x):
    h = embed(model, x)
    gains = []
    for block in model.blocks:
        n1, n2 = block.norm1, block.norm2
        var = h.square().mean(-1, keepdim=True)
        u = n1.weight * torch.tanh(n1.lam * h / (KAPPA * torch.sqrt(var + EPS)))
        h = h + block.attn(u)
        c = gain(block, h.shape[1])
        gains.append(c)
        approx = var + c * n1.lam ** 2 / KAPPA ** 2
        u = n2.weight * torch.tanh(n2.lam * h / (KAPPA * torch.sqrt(approx + EPS)))
        h = h + block.mlp(u)
    return head(model, family, h), gains


@pytest.mark.parametrize("family", ["vit", "gpt"])
def test_model_equals_the_equations_in_float64(family):
    torch.manual_seed(0)
    model = randomised(tiny_model(family, "bhyt", depth=3).double().eval(), scale=0.2)
    x = tiny_input(family)
    x = x.double() if x.is_floating_point() else x
    with torch.no_grad():
        got = model(x)
        expected, gains = reference_bhyt(model, family, x)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    for block, c in zip(model.blocks, gains):
        torch.testing.assert_close(block.norm2.attn_variance_gain, c, rtol=1e-12, atol=0)


def test_norm_outputs_are_bounded_by_the_gain_whatever_the_scale():
    torch.manual_seed(0)
    block = Block(16, 2, residual="bhyt", depth=1)
    with torch.no_grad():
        block.norm1.weight.uniform_(-2, 2)
        block.norm2.weight.uniform_(-2, 2)
        block.norm1.lam.fill_(50.0)  # far into saturation
        for scale in (1e-6, 1.0, 1e6):
            x = torch.randn(2, 5, 16) * scale
            y1 = block.norm1(x)
            y2 = block.norm2(x * 1e3)
            assert torch.isfinite(y1).all() and torch.isfinite(y2).all()
            assert (y1.abs() <= block.norm1.weight.abs() + 1e-6).all()
            assert (y2.abs() <= block.norm2.weight.abs() + 1e-6).all()
            x_big = block(x * 1e6)
            assert torch.isfinite(x_big).all()


class _CountMeans(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.mean, torch.mean):
            self.calls += 1
        return func(*args, **(kwargs or {}))


def test_statistics_are_computed_once_per_block():
    torch.manual_seed(0)
    block = Block(16, 2, residual="bhyt", depth=1)
    x = torch.randn(2, 5, 16)
    with _CountMeans() as counter:
        block(x)
    assert counter.calls == 1
    block.norm2 = BHyTInputNorm(16, 1.0)  # guards the counter: a norm taking its own statistic is seen
    with _CountMeans() as counter:
        block(x)
    assert counter.calls == 2


def test_the_mlp_norm_does_not_rescale_by_its_own_input():
    """Scaling the MLP norm's input by k scales the tanh argument by k: no statistic of that input is taken."""
    torch.manual_seed(0)
    block = Block(16, 2, residual="bhyt", depth=1).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    mid = x + block.attn(block.norm1(x))
    approx = block.norm2.approximate_mean_square(5)
    for k in (0.5, 3.0):
        block.norm1(x)
        expected = block.norm2.weight * torch.tanh(block.norm2.lam * k * mid / (KAPPA * torch.sqrt(approx + EPS)))
        torch.testing.assert_close(block.norm2(k * mid), expected, rtol=1e-12, atol=1e-12)


def test_variance_approximation_against_the_exact_variance():
    """Uniform attention over independent tokens (the approximation's setting): ``σ² + cλ₁²/κ²`` is within a few
    per cent of the measured mean square of the stream after attention, and far closer than ``σ²`` alone."""
    torch.manual_seed(0)
    d, tokens = 256, 64
    block = Block(d, 4, residual="bhyt", depth=1, qkv_bias=False).double()
    with torch.no_grad():
        block.attn.qkv.weight[:2 * d].zero_()  # q = k = 0: uniform attention
        block.attn.qkv.weight[2 * d:].normal_(0, d ** -0.5)
        block.attn.proj.weight.normal_(0, 40 * d ** -0.5)  # an attention output as large as the stream
        block.attn.proj.bias.zero_()
    x = torch.randn(16, tokens, d, dtype=torch.float64) * torch.rand(16, tokens, 1, dtype=torch.float64).add(0.5)
    with torch.no_grad():
        mid = x + block.attn(block.norm1(x))
        approx = block.norm2.approximate_mean_square(tokens)
    exact = mid.square().mean(-1, keepdim=True)
    before = x.square().mean(-1, keepdim=True)
    increment_exact, increment_approx = (exact - before).mean(), (approx - before).mean()
    assert increment_exact > 0.5 * before.mean()  # the correction matters here
    assert abs(increment_approx / increment_exact - 1) < 0.1
    assert (approx - exact).abs().mean() < 0.25 * (before - exact).abs().mean()


def _train(model, steps, total_steps, tokens):
    """Adam steps on ``tokens`` with the step hook after each; ``c`` of every block after every step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    gains, current, losses = [], [], []
    for step in range(1, steps + 1):
        loss = F.cross_entropy(model(tokens[:, :-1]).reshape(-1, 32), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        after_optimizer_step(model, step, total_steps)
        gains.append([b.norm2.attn_variance_gain.clone() for b in model.blocks])
        current.append([gain(b, tokens.shape[1] - 1).detach() for b in model.blocks])
        losses.append(loss.item())
    return gains, current, losses


def test_the_gain_follows_the_weights_at_each_update():
    torch.manual_seed(0)
    model = tiny_model("gpt", "bhyt", depth=2)
    tokens = torch.randint(0, 32, (4, 8))
    model(tokens[:, :-1])
    first = [b.norm2.attn_variance_gain.clone() for b in model.blocks]
    torch.testing.assert_close(first[0], gain(model.blocks[0], 7).detach().double())
    assert gain_update_interval(100) == 2  # 100 // 50
    gains, current, losses = _train(model, 12, 100, tokens)
    for step, (after, expected) in enumerate(zip(gains, current), start=1):
        before = first if step == 1 else gains[step - 2]
        if step % 2:  # between updates c stays what it was, though the weights moved
            assert after == before and after != expected, step
        else:  # an update: c of the weights the step left, for the token count of the first forward
            assert after == expected, step
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < 0.8 * losses[0]


def test_the_update_interval_is_the_official_one():
    assert [gain_update_interval(s) for s in (1, 49, 50, 1686, 25_000, 50_000, 10**7)] == [1, 1, 1, 33, 500, 1000,
                                                                                            1000]
    assert gain_update_interval(1686, updates=10) == 168


def test_without_updates_the_gain_is_computed_once_and_kept():
    torch.manual_seed(0)
    model = tiny_model("gpt", BHyTResidual(gain_updates=0), depth=2)
    tokens = torch.randint(0, 32, (4, 8))
    model(tokens[:, :-1])
    first = [b.norm2.attn_variance_gain.clone() for b in model.blocks]
    gains, current, losses = _train(model, 12, 12, tokens)
    assert all(g == first for g in gains) and current[-1] != first
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < 0.8 * losses[0]
    model.reset_parameters()
    assert all(b.norm2.attn_variance_gain < 0 for b in model.blocks)  # recomputed at the next forward


def test_an_update_before_any_forward_waits_for_the_first_one():
    torch.manual_seed(0)
    model = tiny_model("gpt", "bhyt", depth=1)
    after_optimizer_step(model, 1, 1)
    assert model.blocks[0].norm2.attn_variance_gain < 0
    model(torch.randint(0, 32, (2, 5)))
    torch.testing.assert_close(model.blocks[0].norm2.attn_variance_gain,
                               gain(model.blocks[0], 5).detach().double())


def test_the_step_hook_reaches_a_wrapped_model_and_refuses_bad_numbers():
    torch.manual_seed(0)
    inner = tiny_model("gpt", "bhyt", depth=1)
    inner(torch.randint(0, 32, (2, 6)))
    with torch.no_grad():
        inner.blocks[0].attn.proj.weight.mul_(3.0)
    wrapper = torch.nn.Sequential(inner)
    after_optimizer_step(wrapper, 4, 4)
    torch.testing.assert_close(inner.blocks[0].norm2.attn_variance_gain,
                               gain(inner.blocks[0], 6).detach().double())
    for step, total in ((0, 4), (True, 4), (1.0, 4), (1, 0), (1, None)):
        with pytest.raises(ValueError, match="step"):
            after_optimizer_step(wrapper, step, total)
    after_optimizer_step(torch.nn.Linear(2, 2), 1, 1)  # nothing of ours inside: nothing to do


def test_state_dict_keys_and_round_trip():
    torch.manual_seed(0)
    model = tiny_model("vit", "bhyt", depth=2).eval()
    keys = [k for k in model.state_dict() if k.startswith("blocks.0.norm")]
    assert keys == ["blocks.0.norm1.weight", "blocks.0.norm1.lam", "blocks.0.norm2.weight", "blocks.0.norm2.lam",
                    "blocks.0.norm2.attn_variance_gain"]
    x = tiny_input("vit")
    expected = model(x)
    fresh = tiny_model("vit", "bhyt", depth=2).eval()
    fresh.load_state_dict(model.state_dict())
    torch.testing.assert_close(fresh(x), expected, rtol=0, atol=0)


def test_constants_options_and_errors():
    method = get_residual("bhyt")
    assert (method.input_lam, method.post_lam, method.final_lam, method.kappa) == (2.0, 1.0, 0.0, 10.0)
    model = tiny_model("vit", BHyTResidual(input_lam=3.0, post_lam=3.0, final_lam=1.0), depth=1)
    assert model.blocks[0].norm1.lam.item() == 3.0 and model.blocks[0].norm2.lam.item() == 3.0
    assert isinstance(model.norm, BHyTInputNorm) and model.norm.lam.item() == 1.0
    for bad in (dict(input_lam=0), dict(post_lam=-1.0), dict(kappa=float("inf")), dict(final_lam=-0.5),
                dict(input_lam=True)):
        with pytest.raises(ValueError, match="must be a finite number"):
            BHyTResidual(**bad)
    assert method.gain_updates == 50
    for bad in (-1, 2.0, True, None):
        with pytest.raises(ValueError, match="gain_updates must be a whole number >= 0"):
            BHyTResidual(gain_updates=bad)
    lone = BHyTPostNorm(4, 1.0)
    with pytest.raises(ValueError, match="not attached"):
        lone(torch.randn(1, 2, 4))
    with pytest.raises(ValueError, match="not attached"):
        lone.update_gain()
    block = Block(8, 2, residual="bhyt", depth=1)
    with pytest.raises(ValueError, match="before its block's input norm"):
        block.norm2(torch.randn(1, 2, 8))


def test_full_healing_updates_the_gain_and_lora_healing_keeps_it():
    from layerscale.analysis.eval_data.evaluation import EvalSet
    from layerscale.surgery.healing.heal_loop import heal_model

    data = EvalSet(torch.randint(0, 32, (16, 8)), torch.randint(0, 32, (16, 8)))
    for method in ("full", "lora"):
        if method == "lora":
            pytest.importorskip("peft")
        torch.manual_seed(0)
        model = tiny_model("gpt", "bhyt", depth=2)
        model(data.inputs[:1])
        first = [b.norm2.attn_variance_gain.clone() for b in model.blocks]
        healed, result = heal_model(model, data, 4, method=method, lr=1e-2, batch_size=4)
        assert result.steps == 4
        gains = [b.norm2.attn_variance_gain for b in healed.blocks]
        if method == "full":  # 4 planned steps: an update after each, the last from the healed weights
            assert gains == [gain(b, 8).detach() for b in healed.blocks] and gains != first
        else:
            assert gains == first
