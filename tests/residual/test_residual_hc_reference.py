"""Hyper-Connections and mHC, as implemented for speed, against the papers' equations written out plainly here.

Float64, random weights moved by several random perturbations of every parameter: the branch input, the remixed
streams, the written stream, the logits of whole models and every gradient agree to 1e-6 (and the Sinkhorn–Knopp
gradient to 1e-12), for every model family, for an expanded (broadcast) embedding as for an ordinary stream.
"""

import pytest
import torch
import torch.nn.functional as F

from layerscale.residual.multi_stream.hyper_connections import HyperConnection, HyperConnections, StaticHyperConnections
from layerscale.residual.multi_stream.mhc import ManifoldConstrainedHyperConnection, ManifoldConstrainedHyperConnections, \
    sinkhorn_knopp

from residual_helpers import FAMILIES, tiny_input, tiny_model

TOL = dict(rtol=1e-6, atol=1e-6)


def reference_hc_read(mix, H):
    """HC Eqs. 3–4 and 10–13: per-token ``WC``, ``h₀ = A_mᵀ H``, ``H' = A_rᵀ H``, by broadcasting."""
    if mix.dynamic:
        Hn = F.layer_norm(H, (mix.dim,))
        wc = mix.alpha + mix.alpha_scale * torch.tanh(Hn @ mix.alpha_proj)  # (..., n, n+1)
        B = mix.beta + mix.beta_scale * torch.tanh(Hn @ mix.beta_proj)      # (..., n)
    else:
        wc, B = mix.alpha.expand(*H.shape[:-2], *mix.alpha.shape), mix.beta
    mixed = (wc.unsqueeze(-1) * H.unsqueeze(-2)).sum(-3)                   # Σ_k WC[k, j] H[k]
    return mixed[..., 0, :], mixed[..., 1:, :], B


def reference_sinkhorn(logits, iterations):
    """mHC Eq. 9 as written: normalise the columns, then the rows, of ``exp(logits)``."""
    m = torch.exp(logits)
    for _ in range(iterations):
        m = m / m.sum(-2, keepdim=True)
        m = m / m.sum(-1, keepdim=True)
    return m


def reference_mhc_read(mix, x):
    """mHC Eqs. 7–8 and 3: ``RMSNorm(vec x) φ``, the gates and biases, σ, 2σ and Sinkhorn–Knopp."""
    n = mix.expansion_rate
    flat = x.flatten(-2)
    xn = flat / torch.sqrt(flat.square().mean(-1, keepdim=True) + 1e-6)
    raw = xn @ mix.phi
    pre = torch.sigmoid(mix.gate[0] * raw[..., :n] + mix.bias[:n])
    post = 2 * torch.sigmoid(mix.gate[1] * raw[..., n:2 * n] + mix.bias[n:2 * n])
    res = reference_sinkhorn((mix.gate[2] * raw[..., 2 * n:] + mix.bias[2 * n:]).unflatten(-1, (n, n)),
                             mix.iterations)
    return (pre.unsqueeze(-1) * x).sum(-2), (res.unsqueeze(-1) * x.unsqueeze(-3)).sum(-2), post


def reference_write(carried, weights, update):
    """HC Eq. 5 / mHC Eq. 3: ``H' + Bᵀ update``."""
    return carried + weights.unsqueeze(-1) * update.unsqueeze(-2)


def _perturb(module, generator, scale=0.5):
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * scale)


def _branch(mix, read, write, H, y):
    u, carried, w = read(mix, H) if read is not None else mix.read(H)
    out = (write or type(mix).write.__get__(mix))(carried, w, y * torch.tanh(u))
    return u, carried, out


MODULES = [
    ("hc", lambda d, n: HyperConnection(d, n, 3, dynamic=True, dtype=torch.float64), reference_hc_read),
    ("hc_static", lambda d, n: HyperConnection(d, n, 3, dynamic=False, dtype=torch.float64), reference_hc_read),
    ("mhc", lambda d, n: ManifoldConstrainedHyperConnection(d, n, 3, iterations=20, dtype=torch.float64),
     reference_mhc_read),
]


@pytest.mark.parametrize("name,build,reference", MODULES, ids=[m[0] for m in MODULES])
@pytest.mark.parametrize("n,tokens", [(4, (3, 5)), (2, (7,)), (3, (2, 1))])
@pytest.mark.parametrize("expanded", [False, True], ids=["stream", "expanded"])
def test_read_and_write_equal_the_equations_with_their_gradients(name, build, reference, n, tokens, expanded):
    d = 12
    generator = torch.Generator().manual_seed(n)
    mix = build(d, n)
    for _ in range(3):  # several random points of the parameter space, away from the initialisation
        _perturb(mix, generator)
        shape = (*tokens, d) if expanded else (*tokens, n, d)
        base = torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True)
        H = base.unsqueeze(-2).expand(*tokens, n, d) if expanded else base
        y = torch.randn(*tokens, d, generator=generator, dtype=torch.float64, requires_grad=True)
        weights = torch.randn(*tokens, n, d, generator=generator, dtype=torch.float64)
        got, want = (_branch(mix, None, None, H, y), _branch(mix, reference, reference_write, H, y))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, **TOL)
        inputs = [base, y, *mix.parameters()]
        grads = torch.autograd.grad((got[2] * weights).sum(), inputs)
        expected = torch.autograd.grad((want[2] * weights).sum(), inputs)
        for a, b in zip(grads, expected):
            torch.testing.assert_close(a, b, **TOL)


def test_dynamic_coefficients_are_equations_11_to_13_per_token():
    generator = torch.Generator().manual_seed(0)
    mix = HyperConnection(8, 3, 1, dynamic=True, dtype=torch.float64)
    _perturb(mix, generator)
    H = torch.randn(2, 4, 3, 8, generator=generator, dtype=torch.float64)
    Hn = F.layer_norm(H, (8,))
    wc, B = mix.coefficients(H)
    torch.testing.assert_close(wc, mix.alpha + mix.alpha_scale * torch.tanh(Hn @ mix.alpha_proj), **TOL)
    torch.testing.assert_close(B, mix.beta + mix.beta_scale * torch.tanh(Hn @ mix.beta_proj), **TOL)


@pytest.mark.parametrize("iterations", [1, 2, 20])
def test_sinkhorn_knopp_and_its_gradient_equal_the_unrolled_normalisations(iterations):
    generator = torch.Generator().manual_seed(iterations)
    logits = (torch.randn(30, 4, 4, generator=generator, dtype=torch.float64) * 3).requires_grad_()
    weights = torch.randn(30, 4, 4, generator=generator, dtype=torch.float64)
    got, want = sinkhorn_knopp(logits, iterations), reference_sinkhorn(logits, iterations)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    (g_got,) = torch.autograd.grad((got * weights).sum(), logits)
    (g_want,) = torch.autograd.grad((want * weights).sum(), logits)
    torch.testing.assert_close(g_got, g_want, rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # the path without a gradient takes the same steps
        torch.testing.assert_close(sinkhorn_knopp(logits, iterations), want, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda x: sinkhorn_knopp(x, iterations), (logits[:3].detach().requires_grad_(),))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", [HyperConnections, StaticHyperConnections, ManifoldConstrainedHyperConnections])
def test_whole_models_equal_the_equations_with_their_gradients(family, method):
    torch.manual_seed(0)
    fast = tiny_model(family, method(expansion_rate=3), depth=2).double()
    plain = tiny_model(family, method(expansion_rate=3), depth=2).double()
    generator = torch.Generator().manual_seed(1)
    _perturb(fast, generator, scale=0.2)
    plain.load_state_dict(fast.state_dict())
    reference = reference_mhc_read if method is ManifoldConstrainedHyperConnections else reference_hc_read
    for m in plain.modules():
        if isinstance(m, (HyperConnection, ManifoldConstrainedHyperConnection)):
            m.read = lambda stream, m=m: reference(m, stream)
            m.write = reference_write
    x = tiny_input(family)
    x = x if family == "gpt" else x.double()
    out_fast, out_plain = fast(x), plain(x)
    torch.testing.assert_close(out_fast, out_plain, **TOL)
    out_fast.square().sum().backward()
    out_plain.square().sum().backward()
    for (name, a), (_, b) in zip(fast.named_parameters(), plain.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, **TOL, msg=name)
