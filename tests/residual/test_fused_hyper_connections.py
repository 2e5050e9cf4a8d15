"""The CPU read and write of Hyper-Connections (``fused_hyper_connections``) against the separate operations they
replace, and against the paper's equations.

The separate operations are the library's own general path (taken off the CPU, in reduced precision, under
autocast, ``torch.compile`` or ``torch.func``); forcing it here (``can_fuse`` patched to refuse) gives today's
formulation to compare with. Float64, random points of the parameter space: values and every gradient agree to
1e-12; ``gradcheck`` of both nodes; the write also has its second derivative.
"""

import pytest
import torch

from layerscale.residual.multi_stream import hyper_connections
from layerscale.residual.multi_stream.fused_hyper_connections import can_fuse, fused_read, fused_write
from layerscale.residual.multi_stream.hyper_connections import HyperConnection, HyperConnections, StaticHyperConnections
from layerscale.residual.multi_stream.mhc import ManifoldConstrainedHyperConnection, ManifoldConstrainedHyperConnections

from residual_helpers import FAMILIES, tiny_input, tiny_model
from test_residual_hc_reference import _perturb, reference_hc_read, reference_write

EXACT = dict(rtol=1e-12, atol=1e-12)


@pytest.fixture
def separate(monkeypatch):
    """Within the fixture's use, the read and write take the separate operations (mHC writes through
    ``hyper_connections.write_branch``, so one patch covers both)."""
    def use(on: bool):
        monkeypatch.setattr(hyper_connections, "can_fuse", (lambda *a: False) if on else can_fuse)
    return use


def _branch(mix, H, y):
    u, carried, w = mix.read(H)
    out = mix.write(carried, w, y * torch.tanh(u))
    return u, carried, w, out


@pytest.mark.parametrize("dynamic", [True, False], ids=["hc", "hc_static"])
@pytest.mark.parametrize("n,tokens", [(4, (3, 5)), (2, (7,)), (3, (2, 1)), (1, (4,))])
@pytest.mark.parametrize("expanded", [False, True], ids=["stream", "expanded"])
def test_read_and_write_equal_the_separate_operations_and_the_equations(separate, dynamic, n, tokens, expanded):
    d = 12
    generator = torch.Generator().manual_seed(10 * n + dynamic)
    mix = HyperConnection(d, n, 3, dynamic=dynamic, dtype=torch.float64)
    for _ in range(3):
        _perturb(mix, generator)
        base = torch.randn(*tokens, *(() if expanded else (n,)), d, generator=generator, dtype=torch.float64,
                           requires_grad=True)
        H = base.unsqueeze(-2).expand(*tokens, n, d) if expanded else base
        y = torch.randn(*tokens, d, generator=generator, dtype=torch.float64, requires_grad=True)
        upstream = torch.randn(*tokens, n, d, generator=generator, dtype=torch.float64)
        inputs = [base, y, *mix.parameters()]
        results = []
        for use_separate in (False, True):
            separate(use_separate)
            u, carried, w, out = _branch(mix, H, y)
            loss = (out * upstream).sum() + u.square().sum() + (w.square().sum() if dynamic else 0)
            results.append(([u, carried, w, out], torch.autograd.grad(loss, inputs)))
        (values, grads), (values_sep, grads_sep) = results
        for a, b in zip(values + list(grads), values_sep + list(grads_sep)):
            torch.testing.assert_close(a, b, **EXACT)
        u_ref, carried_ref, w_ref = reference_hc_read(mix, H)
        for a, b in zip((values[0], values[1], values[2], values[3]),
                        (u_ref, carried_ref, w_ref, reference_write(carried_ref, w_ref, y * torch.tanh(u_ref)))):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_the_cpu_path_is_taken_where_it_applies():
    x = torch.randn(2, 4, 8)
    params = HyperConnection(8, 4, 0).parameters()
    assert can_fuse(x, *params)
    assert not can_fuse(x.double(), *HyperConnection(8, 4, 0).parameters())  # mixed dtypes: the general path
    assert not can_fuse(x.bfloat16())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not can_fuse(x)
    assert not can_fuse(x.to("meta"))


def test_the_written_stream_is_contiguous_so_the_next_read_copies_nothing():
    mix = HyperConnection(8, 4, 0)
    u, carried, w = mix.read(torch.randn(3, 5, 4, 8))
    assert not carried.is_contiguous()  # rows 1.. of the mix
    out = mix.write(carried, w, u)
    assert out.is_contiguous() and out.shape == (3, 5, 4, 8)


@pytest.mark.parametrize("dynamic", [True, False], ids=["hc", "hc_static"])
def test_gradcheck_of_the_read(dynamic):
    generator = torch.Generator().manual_seed(3)
    n, d = 3, 5

    def rand(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64).requires_grad_()

    stream, alpha = rand(2, 3, n, d), rand(n, n + 1)
    if dynamic:
        args = (stream, alpha, rand(n), rand(d, n + 1), rand(1), rand(d), rand(1))
    else:
        args = (stream, alpha)
    assert torch.autograd.gradcheck(fused_read, args)


@pytest.mark.parametrize("per_token", [True, False], ids=["dynamic", "static"])
def test_gradcheck_and_gradgradcheck_of_the_write(per_token):
    generator = torch.Generator().manual_seed(4)
    carried = torch.randn(2, 3, 4, 5, generator=generator, dtype=torch.float64).requires_grad_()
    weights = torch.randn(*((2, 3, 4) if per_token else (4,)), generator=generator, dtype=torch.float64)
    weights.requires_grad_()
    update = torch.randn(2, 3, 5, generator=generator, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(fused_write, (carried, weights, update))
    assert torch.autograd.gradgradcheck(fused_write, (carried, weights, update))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", [HyperConnections, StaticHyperConnections, ManifoldConstrainedHyperConnections])
def test_whole_models_equal_the_separate_operations(separate, family, method):
    torch.manual_seed(0)
    model = tiny_model(family, method(expansion_rate=3), depth=2).double()
    _perturb(model, torch.Generator().manual_seed(1), scale=0.2)
    x = tiny_input(family)
    x = x if family == "gpt" else x.double()
    results = []
    for use_separate in (False, True):
        separate(use_separate)
        model.zero_grad()
        out = model(x)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    (out, grads), (out_sep, grads_sep) = results
    torch.testing.assert_close(out, out_sep, **EXACT)
    for (name, _), a, b in zip(model.named_parameters(), grads, grads_sep):
        torch.testing.assert_close(a, b, **EXACT, msg=name)


def test_float32_step_stays_close_to_the_separate_operations(separate):
    """Float32 rounding differs (other summation orders), by a few units of the last place."""
    torch.manual_seed(0)
    model = tiny_model("vit", HyperConnections(expansion_rate=4), depth=3)
    _perturb(model, torch.Generator().manual_seed(2), scale=0.05)
    x = tiny_input("vit")
    outs = []
    for use_separate in (False, True):
        separate(use_separate)
        outs.append(model(x))
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_a_traced_model_records_the_separate_operations():
    """``torch.jit.trace`` (and export) records the general path, not an opaque Python autograd node."""
    torch.manual_seed(0)
    model = tiny_model("vit", HyperConnections(expansion_rate=2), depth=1).eval()
    x = tiny_input("vit")
    traced = torch.jit.trace(model, x, check_trace=False)
    assert "PythonOp" not in str(traced.graph)
    torch.testing.assert_close(traced(x), model(x))
