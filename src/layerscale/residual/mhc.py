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
import torch.nn.functional as F
from torch import nn

from .base import BlockContext, Branch
from .hyper_connections import HyperConnections, check_expansion_rate, sublayer_index

__all__ = ["ManifoldConstrainedHyperConnection", "ManifoldConstrainedHyperConnections", "sinkhorn_knopp"]

#: Initial value of the gating factors α^pre, α^post, α^res (Table 5 of the paper).
GATE_INIT = 0.01
#: The paper's Sinkhorn–Knopp iteration count t_max (§4.2, Table 5).
SINKHORN_ITERATIONS = 20
#: ε of the coefficient RMSNorm (the paper uses 1e-20 with bfloat16 inputs; 1e-6 is safe in float32).
RMS_EPS = 1e-6


def sinkhorn_knopp(logits: torch.Tensor, iterations: int = SINKHORN_ITERATIONS) -> torch.Tensor:
    """Eq. 9: ``M⁽⁰⁾ = exp(logits)``, then ``iterations`` × (normalise columns, then rows); float32 inside.

    The result has rows summing to 1 exactly (the last step) and columns to 1 up to the convergence of the
    iteration. Subtracting each matrix's maximum before ``exp`` rescales ``M⁽⁰⁾`` by a constant, which the first
    normalisation removes: the result is unchanged, and ``exp`` cannot overflow.
    """
    m = logits.float()
    m = torch.exp(m - m.amax(dim=(-2, -1), keepdim=True))
    for _ in range(iterations):
        m = m / m.sum(dim=-2, keepdim=True)
        m = m / m.sum(dim=-1, keepdim=True)
    return m.to(logits.dtype)


class ManifoldConstrainedHyperConnection(nn.Module):
    """One branch's mHC mapping: ``read`` gives ``(H^pre x, H^res x, H^post)``, ``write`` adds ``H^postᵀ y``.

    Keys: ``phi`` ``= [φ^pre | φ^post | φ^res] ∈ R^{nC×(2n+n²)}``, ``gate`` ``= (α^pre, α^post, α^res)``, ``bias``
    ``= [b^pre | b^post | vec(b^res)] ∈ R^{2n+n²}``. :meth:`mappings` returns the constrained mappings for
    inspection (the tests check ``H^res`` is doubly stochastic).
    """

    owns_init = True

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
        """``(H^pre (..., n), H^post (..., n), H^res (..., n, n))`` for ``stream`` ``(..., n, C)`` (Eqs. 7–8)."""
        n = self.expansion_rate
        flat = F.rms_norm(stream.flatten(-2), (n * self.dim,), eps=RMS_EPS)
        raw = flat @ self.phi
        gates = torch.cat((self.gate[0].expand(n), self.gate[1].expand(n), self.gate[2].expand(n * n)))
        logits = raw * gates + self.bias
        pre = torch.sigmoid(logits[..., :n])
        post = 2 * torch.sigmoid(logits[..., n:2 * n])
        res = sinkhorn_knopp(logits[..., 2 * n:].unflatten(-1, (n, n)), self.iterations)
        return pre, post, res

    def read(self, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(H^pre x, H^res x, H^post)``: the branch input, the remixed streams and the write weights."""
        if stream.shape[-2:] != (self.expansion_rate, self.dim):
            raise ValueError(f"mHC expected a stream (..., {self.expansion_rate}, {self.dim}), got "
                             f"{tuple(stream.shape)}; expand the embedding with the method's expand_stream first")
        pre, post, res = self.mappings(stream)
        branch_input = (pre.unsqueeze(-2) @ stream).squeeze(-2)
        return branch_input, res @ stream, post

    def write(self, carried: torch.Tensor, post: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """``H^res x + H^postᵀ update`` (Eq. 3)."""
        return torch.addcmul(carried, post.unsqueeze(-1), update.unsqueeze(-2))

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
