"""mHC: Manifold-Constrained Hyper-Connections (Xie, Wei, Cao et al., DeepSeek-AI 2025, arXiv 2512.24880).

Hyper-Connections (:mod:`.hyper_connections`) with the three mappings constrained so that the residual mixing keeps
the identity-mapping property. With the stream ``x_l ∈ R^{n×C}`` one layer is (Eq. 3)::

    x_{l+1} = H^res x_l + H^postᵀ F(H^pre x_l)

and the mappings are computed from the flattened stream ``vec(x_l) ∈ R^{1×nC}`` (Eq. 7)::

    x' = RMSNorm(vec(x_l))
    H̃^pre  = α^pre  · (x' φ^pre)  + b^pre        φ^pre, φ^post ∈ R^{nC×n}
    H̃^post = α^post · (x' φ^post) + b^post
    H̃^res  = α^res  · mat(x' φ^res) + b^res      φ^res ∈ R^{nC×n²}

then projected (Eq. 8): ``H^pre = σ(H̃^pre)``, ``H^post = 2σ(H̃^post)``, ``H^res = Sinkhorn-Knopp(H̃^res)``, where
Sinkhorn–Knopp starts from ``M⁽⁰⁾ = exp(H̃^res)`` and alternates ``M⁽ᵗ⁾ = T_r(T_c(M⁽ᵗ⁻¹⁾))`` (column then row
normalisation, Eq. 9) for ``t_max`` iterations (20 in the paper, Table 5) — a doubly stochastic matrix (Eq. 6).

Initialisation. The gates ``α`` start at 0.01 (Table 5) and the projections ``φ`` at 0 (the HC initialisation the
paper follows, HC Eq. 14; the RMSNorm weight is absorbed into ``φ`` as in the paper's kernels, §4.3.1). The paper
does not give the biases' initial values; they are HC's static initialisation (HC Eq. 14) placed in the
pre-activation space: ``b^pre = e_{k mod n}``, ``b^res = I_n`` (logits), and ``b^post = 0`` so that
``H^post = 2σ(0) = 1 = B`` exactly. Every stream then carries the Pre-LN stream (``H^res`` has rows summing to 1,
``H^post`` writes the same update everywhere), and the branch input is ``(σ(1) + (n−1)/2)`` times it, which the
branch's Pre-LN norm removes up to its ``eps``: the model starts as the Pre-LN model. ``b^pre`` reading stream
``k mod n`` more strongly breaks the symmetry between streams, as ``A_m`` does in HC.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from ..autocast import without_autocast
from ..base import BlockContext, Branch
from .hyper_connections import HyperConnections, check_expansion_rate, sublayer_index, write_branch

__all__ = ["ManifoldConstrainedHyperConnection", "ManifoldConstrainedHyperConnections", "sinkhorn_knopp"]

#: Initial value of the gating factors α^pre, α^post, α^res (Table 5 of the paper).
GATE_INIT = 0.01
#: The paper's Sinkhorn–Knopp iteration count t_max (§4.2, Table 5).
SINKHORN_ITERATIONS = 20
#: ε of the coefficient RMSNorm (the paper uses 1e-20 with bfloat16 inputs; 1e-6 is safe in float32).
RMS_EPS = 1e-6


def sinkhorn_knopp(logits: torch.Tensor, iterations: int = SINKHORN_ITERATIONS) -> torch.Tensor:
    """Eq. 9: ``M⁽⁰⁾ = exp(logits)``, then ``iterations`` × (normalise columns, then rows); float32 inside
    (float64 stays float64).

    The result has rows summing to 1 exactly (the last step) and columns to 1 up to the convergence of the
    iteration. Subtracting each matrix's maximum before ``exp`` rescales ``M⁽⁰⁾`` by a constant, which the first
    normalisation removes: the result is unchanged, and ``exp`` cannot overflow.

    Computed in the iteration's scaling form, on vectors: every iterate is ``M⁽ᵗ⁾ = diag(r_t) M⁽⁰⁾ diag(c_t)``
    with ``c_t = 1 / (M⁽⁰⁾ᵀ r_{t−1})`` (the column normalisation), ``r_t = 1 / (M⁽⁰⁾ c_t)`` (the row
    normalisation) and ``r_0 = 1`` — the same matrices as normalising ``M`` itself, each step on ``n`` instead of
    ``n²`` numbers per matrix. The backward (:class:`_SinkhornScaling`) is the exact gradient of those
    ``iterations`` steps, written out: four small operations per step, one product for the gradient of ``M⁽⁰⁾``.
    """
    k = logits.to(torch.promote_types(logits.dtype, torch.float32))
    k = torch.exp(k - k.amax(dim=(-2, -1), keepdim=True)).reshape(-1, *k.shape[-2:])
    with without_autocast(k.device.type):  # the products stay in float32 under autocast
        if (torch.is_grad_enabled() and k.requires_grad and not torch.compiler.is_compiling()
                and not torch._C._are_functorch_transforms_active()):
            m = _SinkhornScaling.apply(k, iterations)
        else:  # no gradient, or a compiler / torch.func transform: the same steps, differentiated by autograd
            m = _scale_to_doubly_stochastic(k, iterations)[0]
    return m.view(logits.shape).to(logits.dtype)


def _scale_to_doubly_stochastic(k: torch.Tensor, iterations: int) -> tuple[torch.Tensor, list, list]:
    """``(M, [c_1..c_T], [r_1..r_T])`` for ``k`` ``(batch, n, n)`` positive: the scaling form of Eq. 9."""
    k_t = k.transpose(1, 2)
    c = torch.reciprocal(k.sum(dim=1).unsqueeze(-1))  # (batch, n, 1): r_0 = 1, so M⁽⁰⁾ᵀ r_0 is the column sums
    r = torch.reciprocal(torch.bmm(k, c))
    cs, rs = [c], [r]
    for _ in range(iterations - 1):
        c = torch.reciprocal(torch.bmm(k_t, r))
        r = torch.reciprocal(torch.bmm(k, c))
        cs.append(c)
        rs.append(r)
    return k * r * c.transpose(1, 2), cs, rs


class _SinkhornScaling(torch.autograd.Function):
    """``M = diag(r_T) k diag(c_T)`` of :func:`_scale_to_doubly_stochastic`; backward by hand (once differentiable).

    With ``q_t = kᵀ r_{t−1}``, ``c_t = 1/q_t``, ``s_t = k c_t``, ``r_t = 1/s_t`` and ``G = ∂L/∂M``, going back
    from ``t = T``: ``u_t = ∂L/∂r_t ⊙ r_t²`` (``= −∂L/∂s_t``), ``v_t = (kᵀ u_t − [t=T] (G⊙k)ᵀ r_T) ⊙ c_t²``
    (``= ∂L/∂q_t``), ``∂L/∂r_{t−1} = k v_t`` starting from ``∂L/∂r_T = (G⊙k) c_T``; and
    ``∂L/∂k = G ⊙ r_T c_Tᵀ − Σ_t u_t c_tᵀ + Σ_t r_{t−1} v_tᵀ``, the two sums as one product each.
    """

    @staticmethod
    def forward(ctx, k, iterations):
        # The steps of _scale_to_doubly_stochastic, each c_t and r_t written straight into its slot for backward.
        cs, rs = k.new_empty(iterations, *k.shape[:-1], 1), k.new_empty(iterations, *k.shape[:-1], 1)
        k_t = k.transpose(1, 2)
        torch.reciprocal(k.sum(dim=1).unsqueeze(-1), out=cs[0])
        torch.reciprocal(torch.bmm(k, cs[0]), out=rs[0])
        for t in range(1, iterations):
            torch.reciprocal(torch.bmm(k_t, rs[t - 1]), out=cs[t])
            torch.reciprocal(torch.bmm(k, cs[t]), out=rs[t])
        ctx.save_for_backward(k, cs, rs)  # (T, batch, n, 1) each
        return k * rs[-1] * cs[-1].transpose(1, 2)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        k, cs, rs = ctx.saved_tensors
        with without_autocast(k.device.type):
            grad = grad.to(k.dtype)
            steps, k_t = cs.shape[0], k.transpose(1, 2)
            c, r = cs[-1], rs[-1]
            gk = grad * k
            g_r = torch.bmm(gk, c)
            g_c = torch.bmm(gk.transpose(1, 2), r)  # ∂L/∂c_T through M
            c2, r2 = cs.square(), rs.square()
            us, vs = torch.empty_like(cs), torch.empty_like(cs)
            for t in reversed(range(steps)):
                u = torch.mul(g_r, r2[t], out=us[t])
                w = torch.bmm(k_t, u)
                torch.mul(w - g_c if t == steps - 1 else w, c2[t], out=vs[t])
                if t:
                    g_r = torch.bmm(k, vs[t])
            # Σ_t r_{t−1} v_tᵀ − Σ_t u_t c_tᵀ as (batch, n, T) @ (batch, T, n) products.
            r_prev = torch.cat((torch.ones_like(rs[:1]), rs[:-1])).squeeze(-1)  # (T, batch, n)
            grad_k = torch.baddbmm(grad * r * c.transpose(1, 2), r_prev.permute(1, 2, 0),
                                   vs.squeeze(-1).transpose(0, 1))
            grad_k = torch.baddbmm(grad_k, us.squeeze(-1).permute(1, 2, 0), cs.squeeze(-1).transpose(0, 1), alpha=-1)
        return grad_k, None


class ManifoldConstrainedHyperConnection(nn.Module):
    """One branch's mHC mapping: ``read`` gives ``(H^pre x, H^res x, H^post)``, ``write`` adds ``H^postᵀ y``.

    Keys: ``phi`` ``= [φ^pre | φ^post | φ^res] ∈ R^{nC×(2n+n²)}``, ``gate`` ``= (α^pre, α^post, α^res)``, ``bias``
    ``= [b^pre | b^post | vec(b^res)] ∈ R^{2n+n²}``. :meth:`mappings` returns the constrained mappings for
    inspection (the tests check ``H^res`` is doubly stochastic).
    """

    owns_init = True
    #: As :attr:`HyperConnection.fused <.hyper_connections.HyperConnection.fused>`.
    fused = True

    def __init__(self, dim: int, expansion_rate: int, layer_index: int, iterations: int = SINKHORN_ITERATIONS,
                 device=None, dtype=None) -> None:
        super().__init__()
        n = check_expansion_rate(expansion_rate, minimum=2)
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise ValueError(f"sinkhorn_iterations must be an int >= 1, got {iterations!r}")
        factory = {"device": device, "dtype": dtype}
        self.dim, self.expansion_rate, self.layer_index, self.iterations = dim, n, layer_index, iterations
        self.phi = nn.Parameter(torch.empty(n * dim, 2 * n + n * n, **factory))
        self.gate = nn.Parameter(torch.empty(3, **factory))
        self.bias = nn.Parameter(torch.empty(2 * n + n * n, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``φ = 0``, ``α = 0.01``, ``b^pre = e_{k mod n}``, ``b^post = 0``, ``b^res = I`` (module docstring)."""
        n = self.expansion_rate
        with torch.no_grad():
            self.phi.zero_()
            self.gate.fill_(GATE_INIT)
            self.bias.zero_()
            self.bias[self.layer_index % n] = 1.0
            self.bias[2 * n:].copy_(torch.eye(n, device=self.bias.device, dtype=self.bias.dtype).flatten())

    def mappings(self, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(H^pre (..., n), H^post (..., n), H^res (..., n, n))`` for ``stream`` ``(..., n, C)`` (Eqs. 7–8).

        ``RMSNorm(vec x) φ`` is computed as ``(vec x · φ) / rms(vec x)``, the order of the paper's kernels (§4.3.1):
        the same numbers (the norm scales each row, and its weight lives in ``φ``), without writing the
        normalised ``n·C``-wide stream. The product is ``φᵀ (vec x)ᵀ``: a wide, short GEMM whose weight gradient is
        one too, instead of a skinny ``tokens × (2n+n²)`` one, several times slower on the CPU.
        """
        n, width = self.expansion_rate, self.expansion_rate * self.dim
        flat = stream.reshape(-1, width)
        inv_rms = torch.rsqrt(torch.linalg.vector_norm(flat, dim=-1).square() / width + RMS_EPS)
        raw = (self.phi.t().contiguous() @ flat.t()).t()  # (tokens, 2n+n²) = vec(x) φ
        gates = torch.cat((self.gate[0].expand(n), self.gate[1].expand(n), self.gate[2].expand(n * n)))
        logits = ((raw * inv_rms.unsqueeze(-1)) * gates + self.bias).contiguous()  # row-major: fast small products
        batch = stream.shape[:-2]
        pre = torch.sigmoid(logits[:, :n]).view(*batch, n)
        post = 2 * torch.sigmoid(logits[:, n:2 * n]).view(*batch, n)
        res = sinkhorn_knopp(logits[:, 2 * n:].unflatten(-1, (n, n)), self.iterations).view(*batch, n, n)
        return pre, post, res

    def read(self, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(H^pre x, H^res x, H^post)``: the branch input, the remixed streams and the write weights.

        Both mixes in one batched product, ``[H^pre; H^res] x`` per token, as in Hyper-Connections' ``read``.
        """
        if stream.shape[-2:] != (self.expansion_rate, self.dim):
            raise ValueError(f"mHC expected a stream (..., {self.expansion_rate}, {self.dim}), got "
                             f"{tuple(stream.shape)}; expand the embedding with the method's expand_stream first")
        n, tokens = self.expansion_rate, stream.shape[:-2]
        stream = stream.contiguous()  # copies only the expanded embedding, once
        pre, post, res = self.mappings(stream)
        mix = torch.cat((pre.unsqueeze(-2), res), dim=-2).reshape(-1, n + 1, n)
        mixed = torch.bmm(mix, stream.view(-1, n, self.dim)).view(*tokens, n + 1, self.dim)
        branch_input, carried = mixed.split((1, n), dim=-2)
        return branch_input.squeeze(-2).clone(), carried, post  # the copy: see HyperConnection.read

    def write(self, carried: torch.Tensor, post: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """``H^res x + H^postᵀ update`` (Eq. 3), as :meth:`HyperConnection.write`."""
        return write_branch(self.fused, carried, post, update)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, expansion_rate={self.expansion_rate}, layer_index={self.layer_index}, "
                f"sinkhorn_iterations={self.iterations}")


class ManifoldConstrainedHyperConnections(HyperConnections):
    """mHC: ``n`` streams (default 4, as in the paper; at least 2) mixed by a doubly stochastic ``H^res``.

    ``sinkhorn_iterations`` is ``t_max`` (default 20). Like :class:`~.hyper_connections.HyperConnections`: the
    branches keep their Pre-LN norms, the embedding is expanded to ``n`` copies and the streams are summed before
    the final norm. Keys ``stream_mix{i}.phi``, ``.gate``, ``.bias``. ``init_value`` ignored; ``ls_placement`` must
    stay ``"both"``.
    """

    name = "mhc"

    def __init__(self, expansion_rate: int = 4, sinkhorn_iterations: int = SINKHORN_ITERATIONS) -> None:
        self.num_streams = check_expansion_rate(expansion_rate, minimum=2)
        if isinstance(sinkhorn_iterations, bool) or not isinstance(sinkhorn_iterations, int) or sinkhorn_iterations < 1:
            raise ValueError(f"sinkhorn_iterations must be an int >= 1, got {sinkhorn_iterations!r}")
        self.sinkhorn_iterations = sinkhorn_iterations

    def stream_mix(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ManifoldConstrainedHyperConnection(ctx.dim, self.num_streams, sublayer_index(ctx, branch),
                                                  self.sinkhorn_iterations)

    def __repr__(self) -> str:
        return (f"ManifoldConstrainedHyperConnections(expansion_rate={self.num_streams}, "
                f"sinkhorn_iterations={self.sinkhorn_iterations})")
