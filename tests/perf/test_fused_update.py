"""The fused LayerScale residual update: exact gradients, equality with the unfused expression, lean saved tensors."""

import pytest
import torch

from layerscale.layers import LayerScale, ScalarScale
from layerscale.layers import fused
from layerscale.layers.fused import ScaledResidualAdd, scaled_residual_add


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks of 5 rows of width 4 (a ragged last chunk for 3·7 rows), so the chunked CPU backward is exercised."""
    monkeypatch.setattr(fused, "CPU_CHUNK_ELEMENTS_PER_THREAD", 20)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)


def _inputs(shape, gamma_shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    residual = torch.randn(shape, generator=g, dtype=dtype, requires_grad=True)
    branch = torch.randn(shape, generator=g, dtype=dtype, requires_grad=True)
    gamma = torch.randn(gamma_shape, generator=g, dtype=dtype, requires_grad=True)
    return residual, branch, gamma


def _mask(batch, ndim, dtype=torch.float64, seed=1):
    g = torch.Generator().manual_seed(seed)
    keep = (torch.rand(batch, generator=g) > 0.4).to(dtype) / 0.6
    keep[0] = 0.0  # at least one dropped sample
    return keep.view((batch,) + (1,) * (ndim - 1))


@pytest.mark.parametrize("gamma_shape", [(4,), (1,)], ids=["per_channel", "scalar"])
@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "keep_mask"])
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
def test_gradcheck_float64(request, gamma_shape, with_mask, chunked):
    if chunked:
        request.getfixturevalue("tiny_chunks")
    residual, branch, gamma = _inputs((3, 7, 4), gamma_shape)
    mask = _mask(3, 3) if with_mask else None
    assert torch.autograd.gradcheck(lambda r, b, g: ScaledResidualAdd.apply(r, b, g, mask), (residual, branch, gamma))


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 6, 3)], ids=["2d", "4d"])
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
def test_gradcheck_other_ranks(request, shape, chunked):
    if chunked:
        request.getfixturevalue("tiny_chunks")
    residual, branch, gamma = _inputs(shape, (3,))
    mask = _mask(shape[0], len(shape))
    assert torch.autograd.gradcheck(lambda r, b, g: ScaledResidualAdd.apply(r, b, g, mask), (residual, branch, gamma))


@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "keep_mask"])
def test_double_backward_gradgradcheck(tiny_chunks, with_mask):
    residual, branch, gamma = _inputs((3, 7, 4), (4,))
    mask = _mask(3, 3) if with_mask else None
    assert torch.autograd.gradgradcheck(lambda r, b, g: ScaledResidualAdd.apply(r, b, g, mask),
                                        (residual, branch, gamma))


@pytest.mark.parametrize("gamma_shape", [(16,), (1,)], ids=["per_channel", "scalar"])
@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "keep_mask"])
@pytest.mark.parametrize("chunked", [False, True], ids=["one_chunk", "many_chunks"])
def test_equals_unfused_expression_forward_and_backward(monkeypatch, gamma_shape, with_mask, chunked):
    if chunked:
        monkeypatch.setattr(fused, "CPU_CHUNK_ELEMENTS_PER_THREAD", 16 * 3)
    residual, branch, gamma = _inputs((4, 9, 16), gamma_shape, dtype=torch.float32)
    mask = _mask(4, 3, dtype=torch.float32) if with_mask else None
    upstream = torch.randn(4, 9, 16)
    out = scaled_residual_add(residual, branch, gamma, mask)
    assert out.grad_fn is not None and type(out.grad_fn).__name__ == "ScaledResidualAddBackward"
    fused_grads = torch.autograd.grad(out, (residual, branch, gamma), upstream)
    reference = residual + (gamma * branch if mask is None else (gamma * branch) * mask)
    reference_grads = torch.autograd.grad(reference, (residual, branch, gamma), upstream)
    torch.testing.assert_close(out, reference)
    for ours, theirs in zip(fused_grads, reference_grads):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_residual_gradient_is_the_incoming_gradient_without_a_copy():
    residual, branch, gamma = _inputs((2, 3, 4), (4,), dtype=torch.float32)
    upstream = torch.randn(2, 3, 4)
    d_residual, = torch.autograd.grad(scaled_residual_add(residual, branch, gamma), (residual,), upstream)
    assert d_residual.data_ptr() == upstream.data_ptr()


def test_bfloat16_branch_keeps_dtypes_and_accumulates_gamma_in_float32():
    g = torch.Generator().manual_seed(0)
    residual = torch.randn(8, 33, 64, generator=g, requires_grad=True)
    branch = torch.randn(8, 33, 64, generator=g).bfloat16().requires_grad_()
    gamma = torch.full((64,), 1e-3, requires_grad=True)
    upstream = torch.randn(8, 33, 64, generator=g)
    out = scaled_residual_add(residual, branch, gamma)
    assert out.dtype == torch.float32
    d_residual, d_branch, d_gamma = torch.autograd.grad(out, (residual, branch, gamma), upstream)
    assert (d_residual.dtype, d_branch.dtype, d_gamma.dtype) == (torch.float32, torch.bfloat16, torch.float32)
    exact = (upstream.double() * branch.double()).sum((0, 1))
    torch.testing.assert_close(d_gamma.double(), exact, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "keep_mask"])
def test_saves_no_more_than_the_unfused_expression(with_mask, saved_storages):
    residual, branch, gamma = _inputs((4, 10, 32), (32,), dtype=torch.float32)
    mask = _mask(4, 3, dtype=torch.float32) if with_mask else None
    fused_bytes = sum(saved_storages(lambda: scaled_residual_add(residual, branch, gamma, mask)).values())
    unfused_bytes = sum(saved_storages(
        lambda: residual + (gamma * branch if mask is None else (gamma * branch) * mask)).values())
    assert fused_bytes <= unfused_bytes
    assert fused_bytes >= branch.numel() * 4  # the branch itself is needed for dγ


def test_frozen_gamma_does_not_keep_the_branch(saved_storages):
    residual, branch, gamma = _inputs((4, 10, 32), (32,), dtype=torch.float32)
    gamma.requires_grad_(False)
    assert sum(saved_storages(lambda: scaled_residual_add(residual, branch, gamma)).values()) < branch.numel() * 4
    out = scaled_residual_add(residual, branch, gamma)
    d_branch, = torch.autograd.grad(out.sum(), (branch,))
    torch.testing.assert_close(d_branch, gamma.expand_as(branch))


def test_inference_and_unusual_shapes_take_plain_addcmul():
    residual, branch, gamma = _inputs((2, 3, 4), (4,), dtype=torch.float32)
    with torch.no_grad():
        assert scaled_residual_add(residual, branch, gamma).grad_fn is None
    broadcast = scaled_residual_add(residual, branch[:1], gamma)  # branch broadcasts over the batch
    assert type(broadcast.grad_fn).__name__ == "AddcmulBackward0"
    torch.testing.assert_close(broadcast, residual + gamma * branch[:1])


def test_tensors_off_the_cpu_take_plain_addcmul():
    """Off the CPU (measured on a GPU: the Python backward costs more than it saves) autograd's addcmul is used."""
    residual, branch, gamma = (torch.empty(shape, device="meta", requires_grad=True)
                               for shape in ((2, 3, 4), (2, 3, 4), (4,)))
    out = scaled_residual_add(residual, branch, gamma)
    assert type(out.grad_fn).__name__ == "AddcmulBackward0"
    cpu_out = scaled_residual_add(*_inputs((2, 3, 4), (4,), dtype=torch.float32))
    assert type(cpu_out.grad_fn).__name__ == "ScaledResidualAddBackward"


def test_layer_scale_and_scalar_scale_use_the_fused_update():
    x, y = torch.randn(2, 5, 8, requires_grad=True), torch.randn(2, 5, 8, requires_grad=True)
    mask = torch.tensor([0.0, 2.0]).view(2, 1, 1)
    for scale in (LayerScale(8, 0.3), ScalarScale(0.3)):
        out = scale.add_to(x, y, mask)
        assert type(out.grad_fn).__name__ == "ScaledResidualAddBackward"
        torch.testing.assert_close(out, x + mask * scale(y))


def test_torch_func_grad_falls_back_and_agrees():
    residual, branch, gamma = _inputs((2, 3, 4), (4,), dtype=torch.float64)
    mask = _mask(2, 3)

    def loss(g):
        return scaled_residual_add(residual.detach(), branch.detach(), g, mask).square().sum()

    expected, = torch.autograd.grad(loss(gamma), (gamma,))
    torch.testing.assert_close(torch.func.grad(loss)(gamma.detach()), expected)
