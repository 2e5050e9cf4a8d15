"""The hyper-connection write ``H' + B ⊗ y`` (``write_streams``): the value and gradients of ``torch.baddbmm``, bit
for bit on the CPU, for the layouts the residual methods hand it; reduced precision formed in float32; a correct
backward.
"""

from __future__ import annotations

import pytest
import torch

from layerscale.residual.multi_stream.hyper_connections import write_streams


def _baddbmm_write(carried, weights, update):
    """The write as one ``baddbmm``: the definition the faster form must reproduce exactly."""
    *tokens, n, d = carried.shape
    return torch.baddbmm(carried.reshape(-1, n, d), weights.expand(*tokens, n).reshape(-1, n, 1),
                         update.reshape(-1, 1, d)).view(carried.shape)


def _value_and_grads(write, mixed, weights, update, upstream):
    mixed, weights, update = (t.detach().clone().requires_grad_() for t in (mixed, weights, update))
    carried = mixed.split((1, mixed.shape[-2] - 1), dim=-2)[1]  # a strided view, as a hyper-connection's read gives
    out = write(carried, weights, update)
    out.backward(upstream)
    return out.detach(), mixed.grad, weights.grad, update.grad


@pytest.mark.parametrize("width", [64, 92, 180])  # both sides of baddbmm's small-matrix threshold n·d = 400
@pytest.mark.parametrize("per_token", [True, False], ids=["dynamic", "static"])
def test_value_and_gradients_equal_baddbmm_bit_for_bit(width, per_token):
    g = torch.Generator().manual_seed(width)
    batch, tokens, n = 3, 17, 4
    mixed = torch.randn(batch, tokens, n + 1, width, generator=g) * 5
    weights = torch.randn(*((batch, tokens) if per_token else ()), n, generator=g)
    update = torch.randn(batch, tokens, width, generator=g)
    upstream = torch.randn(tokens, batch, n, width, generator=g).transpose(0, 1)  # a non-contiguous gradient too
    ours = _value_and_grads(write_streams, mixed, weights, update, upstream)
    reference = _value_and_grads(_baddbmm_write, mixed, weights, update, upstream)
    for name, a, b in zip(("value", "d_stream", "d_weights", "d_update"), ours, reference):
        assert torch.equal(a, b), f"{name} differs from baddbmm by {(a - b).abs().max().item():.3g}"


def test_an_addcmul_write_would_fail_the_bitwise_check():
    """The check above can fail: a fused multiply-add (``addcmul``) rounds differently from ``baddbmm``."""
    g = torch.Generator().manual_seed(0)
    carried, weights, update = torch.randn(64, 4, 92, generator=g), torch.randn(64, 4, generator=g), \
        torch.randn(64, 92, generator=g)
    fused = torch.addcmul(carried, weights.unsqueeze(-1), update.unsqueeze(-2))
    assert not torch.equal(fused, _baddbmm_write(carried, weights, update))
    assert torch.equal(write_streams(carried, weights, update), _baddbmm_write(carried, weights, update))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_is_formed_in_float32_and_rounded_back(dtype):
    g = torch.Generator().manual_seed(1)
    shapes = ((32, 4, 92), (32, 4), (32, 92))
    carried, weights, update = (torch.randn(*shape, generator=g).to(dtype) for shape in shapes)
    exact = carried.double() + weights.double().unsqueeze(-1) * update.double().unsqueeze(-2)
    out = write_streams(carried, weights, update)
    assert out.dtype == dtype
    assert torch.equal(out, exact.float().to(dtype))


def test_mixed_dtypes_under_autocast_keep_the_stream_in_float32():
    carried, weights, update = torch.randn(8, 4, 16), torch.randn(8, 4), torch.randn(8, 16).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = write_streams(carried, weights, update)
    assert out.dtype == torch.float32
    assert torch.equal(out, carried + weights.unsqueeze(-1) * update.float().unsqueeze(-2))


@pytest.mark.parametrize("per_token", [True, False], ids=["dynamic", "static"])
def test_gradients_and_second_derivatives(per_token):
    g = torch.Generator().manual_seed(2)
    carried = torch.randn(2, 3, 4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    weights = torch.randn(*((2, 3) if per_token else ()), 4, dtype=torch.float64, generator=g, requires_grad=True)
    update = torch.randn(2, 3, 5, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(write_streams, (carried, weights, update))
    assert torch.autograd.gradgradcheck(write_streams, (carried, weights, update))
