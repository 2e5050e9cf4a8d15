"""``layer_norm_projection``: ``W · LayerNorm(x)`` without the normalised copy equals the written composition, value
and gradient, on every path (hand-written backward, autograd fallback under ``torch.func``, no gradient)."""

import pytest
import torch
import torch.nn.functional as F

from layerscale.residual.multi_stream.normalized_projection import layer_norm_projection


def _reference(rows, weight):
    return weight @ F.layer_norm(rows, (rows.shape[1],)).t()


def _inputs(dtype=torch.float64, rows=37, width=24, outputs=6, offset=0.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(rows, width, generator=g, dtype=dtype) * 2 + offset).requires_grad_()
    w = torch.randn(outputs, width, generator=g, dtype=dtype).requires_grad_()
    return x, w


def test_value_and_gradient_equal_layer_norm_then_product_in_float64():
    x, w = _inputs()
    z = layer_norm_projection(x, w)
    grad = torch.randn_like(z)
    gx, gw = torch.autograd.grad(z, (x, w), grad)
    rz = _reference(x, w)
    rgx, rgw = torch.autograd.grad(rz, (x, w), grad)
    torch.testing.assert_close(z, rz, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gx, rgx, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gw, rgw, rtol=1e-10, atol=1e-12)


def test_gradcheck():
    x, w = _inputs(rows=5, width=7, outputs=3)
    assert torch.autograd.gradcheck(layer_norm_projection, (x, w))


@pytest.mark.parametrize("needs", ["rows", "weight"])
def test_gradient_of_one_input_only(needs):
    x, w = _inputs()
    x.requires_grad_(needs == "rows")
    w.requires_grad_(needs == "weight")
    target = x if needs == "rows" else w
    (got,) = torch.autograd.grad(layer_norm_projection(x, w).sum(), target)
    (want,) = torch.autograd.grad(_reference(x, w).sum(), target)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_float32_close_to_the_reference_with_a_row_mean_ten_times_the_spread():
    x, w = _inputs(dtype=torch.float32, rows=64, width=192, offset=20.0)
    torch.testing.assert_close(layer_norm_projection(x, w), _reference(x, w), rtol=1e-4, atol=1e-4)


def test_without_gradient_and_under_torch_func_the_same_numbers():
    x, w = _inputs()
    with torch.no_grad():
        torch.testing.assert_close(layer_norm_projection(x, w), _reference(x, w), rtol=1e-12, atol=1e-12)
    grad_func = torch.func.grad(lambda a: layer_norm_projection(a, w.detach()).square().sum())(x.detach())
    (want,) = torch.autograd.grad(_reference(x, w.detach()).square().sum(), x)
    torch.testing.assert_close(grad_func, want, rtol=1e-10, atol=1e-12)


def test_bfloat16_inputs_and_autocast_compute_in_float32():
    x, w = _inputs(dtype=torch.float32)
    want = _reference(x, w)
    assert layer_norm_projection(x.bfloat16(), w).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = layer_norm_projection(x, w)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_mismatched_shapes_one_line_error():
    with pytest.raises(ValueError, match=r"rows \(N, d\) and weight \(m, d\), got \(4, 3\) and \(2, 5\)"):
        layer_norm_projection(torch.zeros(4, 3), torch.zeros(2, 5))


def test_off_the_cpu_the_plain_layer_norm_then_product_shapes_on_meta():
    x = torch.empty(10, 8, device="meta")
    w = torch.empty(3, 8, device="meta")
    out = layer_norm_projection(x, w)
    assert out.shape == (3, 10) and out.device.type == "meta"


@pytest.mark.parametrize("residual", ["hc", "hc_static", "mhc"])
def test_a_hyper_connection_model_runs_forward_on_the_meta_device(residual):
    """Shape inference on ``meta`` (no autocast exists there: turning it off must not ask)."""
    from layerscale import create_model

    with torch.device("meta"):
        model = create_model("vit", img_size=8, patch_size=4, num_classes=3, embed_dim=16, depth=2, num_heads=2,
                             residual=residual)
        out = model(torch.empty(2, 3, 8, 8))
    assert out.shape == (2, 3) and out.device.type == "meta"
