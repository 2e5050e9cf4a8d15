"""Hyper-Connections: the residual stream widened to ``n`` parallel streams with learned width and depth connections
(Zhu, Huang, Huang, Zeng, Mao, Wu, Min and Zhou 2024, "Hyper-Connections", ICLR 2025; arXiv 2409.19606).

Notation of the paper (§2): the stream is the hyper hidden matrix ``H ∈ R^{n×d}``, every row initialised to the
embedding ``h⁰`` (§2.1). Each layer ``T`` (here: each branch, attention or MLP, with its Pre-LN norm) is wrapped by
the connection matrix ``HC = [[0, B], [A_m, A_r]]`` (Eq. 1)::

    h₀ᵀ = A_mᵀ H            (Eq. 3, the branch input: a mix of the streams)
    H'  = A_rᵀ H            (Eq. 4, the streams remixed)
    Ĥ   = Bᵀ T(h₀)ᵀ + H'    (Eq. 5, the branch output written to every stream; Eq. 2 in one line)

Dynamic hyper-connections (§2.2) make the entries depend on the input (Eqs. 10–13)::

    H̄      = norm(H)                                  (LayerNorm of every stream row, no affine: Algorithm 2)
    B(H)   = s_β ∘ tanh(H̄ W_β)ᵀ + B                   (Eq. 11)
    A_m(H) = s_α ∘ tanh(H̄ W_m) + A_m                   (Eq. 12)
    A_r(H) = s_α ∘ tanh(H̄ W_r) + A_r                   (Eq. 13)

Initialisation (§2.3, Eq. 14): ``W_β, W_m, W_r = 0``, ``B = 1_{1×n}``, ``A_m = e_{k mod n}``, ``A_r = I_n`` with
``k`` the index of the layer, and ``s_α = s_β = 0.01`` (Algorithm 2). Every stream then carries the same vector as
the Pre-LN stream: the model at initialisation **is** the Pre-LN model. Before the head the streams are summed (§2.1)
and the sum goes through the final norm; a norm is scale-invariant up to its ``eps``, so the logits equal the
Pre-LN logits up to that ``eps`` (exactly, to rounding, with ``eps → 0``).

Not applied: the paper's OLMo recipe (§4, "Implementation") also multiplies the initial std of the attention and MLP
output projections by √n to keep the summed output's std; that is a training recipe for its models, it changes
the weights (so the model would no longer equal our Pre-LN model at step 0), and the final norm already removes the
sum's scale. The static parameters get no weight decay (§4): :class:`HyperConnection` lists them in
``no_weight_decay_names``, which the trainer's parameter groups honour. (``W_β`` is a vector and, like every 1-D
parameter there, is not decayed either — a small departure from "the dynamic component does".)
"""

from __future__ import annotations

import torch
from torch import nn

from ..autocast import without_autocast
from ..base import BlockContext, Branch, ResidualMethod
from .fused_hyper_connections import can_fuse, fused_read, fused_write
from .normalized_projection import layer_norm_projection

__all__ = ["HyperConnection", "HyperConnections", "StaticHyperConnections", "check_expansion_rate",
           "expand_streams", "sum_streams", "sublayer_index", "write_streams"]

#: The small initial value of the dynamic scales ``s_α`` and ``s_β`` (Algorithm 2 of the paper).
DYNAMIC_SCALE_INIT = 0.01


def check_expansion_rate(n, minimum: int = 1) -> int:
    """Return ``n`` if it is an int ``>= minimum``, else raise a one-line ``ValueError``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < minimum:
        raise ValueError(f"expansion_rate must be an int >= {minimum}, got {n!r}")
    return n


def sublayer_index(ctx: BlockContext, branch: Branch) -> int:
    """The 0-based index ``k`` of a branch among all sub-layers: ``2·(block − 1)`` for attention, ``+1`` for the MLP."""
    return 2 * (ctx.index - 1) + (0 if branch == "attn" else 1)


def expand_streams(x: torch.Tensor, n: int) -> torch.Tensor:
    """``(..., d) -> (..., n, d)``: ``n`` copies of ``x`` (a broadcast view, no copy)."""
    return x.unsqueeze(-2).expand(*x.shape[:-1], n, x.shape[-1])


class _SumStreams(torch.autograd.Function):
    """``stream.sum(-2)`` whose backward hands on a contiguous gradient, not a broadcast (stride-0) view of it."""

    @staticmethod
    def forward(ctx, stream: torch.Tensor) -> torch.Tensor:
        ctx.stream_shape = stream.shape
        return stream.sum(dim=-2)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        # A broadcast gradient would reach the last branch's batched products, which then fall back to one small
        # product per token; one copy here is far cheaper.
        return grad.unsqueeze(-2).expand(ctx.stream_shape).contiguous()


def sum_streams(stream: torch.Tensor) -> torch.Tensor:
    """``(..., n, d) -> (..., d)``: the row-wise sum of the hyper hidden matrix (§2.1)."""
    return _SumStreams.apply(stream)


#: Dtypes whose rank-1 update is formed in float32, as a matrix product accumulates them, then rounded back.
_REDUCED_FLOATS = (torch.float16, torch.bfloat16)


class _WriteStreams(torch.autograd.Function):
    """``carried + weights · update`` on ``(T, n, d)``, ``(T, n, 1)``, ``(T, 1, d)``: a rank-1 update per token.

    The value is ``torch.baddbmm(carried, weights, update)``'s, formed as one broadcast product and one addition:
    with an inner dimension of 1 every entry is one rounded product and one rounded sum, so on the CPU the two are
    equal bit for bit (tested). The elementwise form is 5–19 times faster there at ``n · d < 400`` (width below 100
    at ``n = 4``), where ``baddbmm`` takes PyTorch's small-matrix loop, and as fast above (benchmarks/README.md). Not
    ``addcmul``: its fused multiply-add rounds once and would change the numbers. Float16 and bfloat16 inputs are
    combined in float32, as a matrix product accumulates them, and rounded back to their dtype at the end. The
    backward is ``baddbmm``'s: the gradient itself for ``carried`` and two batched products, ``grad · updateᵀ`` and
    ``weightsᵀ · grad``, faster than the broadcast form's two reductions over the ``n``-times wider stream. Other
    devices keep the one ``baddbmm`` kernel: a GPU step is bound by kernel launches, and the elementwise form was
    not measured there. The connections' CPU path in float32 and float64 is
    :func:`~.fused_hyper_connections.fused_write` instead (one ``addcmul``: the same sum, rounded once).
    """

    @staticmethod
    def forward(ctx, carried: torch.Tensor, weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(weights, update)
        if carried.device.type != "cpu":  # one kernel where launches cost (see the docstring)
            return torch.baddbmm(carried, weights, update)
        if carried.dtype in _REDUCED_FLOATS:  # in float32, rounded back at the end, as baddbmm accumulates
            return torch.mul(weights.float(), update.float()).add_(carried.float()).to(carried.dtype)
        return torch.mul(weights, update).add_(carried)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        weights, update = ctx.saved_tensors
        grad_weights = grad.bmm(update.transpose(1, 2)) if ctx.needs_input_grad[1] else None
        grad_update = weights.transpose(1, 2).bmm(grad) if ctx.needs_input_grad[2] else None
        return grad, grad_weights, grad_update


def write_streams(carried: torch.Tensor, weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """``carried + weights ⊗ update``: ``(..., n, d)``, ``(..., n)`` or ``(n,)``, ``(..., d)`` -> ``(..., n, d)``.

    A batched rank-1 product added to ``carried`` (:class:`_WriteStreams`): its backward is two batched products,
    where ``addcmul``'s is two broadcast products and two reductions over the ``n``-times wider stream. It runs in the
    promoted dtype of its inputs, autocast or not, as ``addcmul`` would: under bfloat16 autocast the stream stays
    float32.
    """
    *tokens, n, d = carried.shape
    dtype = torch.promote_types(torch.promote_types(carried.dtype, weights.dtype), update.dtype)
    with without_autocast(carried.device.type):
        out = _WriteStreams.apply(carried.reshape(-1, n, d).to(dtype),
                                  weights.expand(*tokens, n).reshape(-1, n, 1).to(dtype),
                                  update.reshape(-1, 1, d).to(dtype))
    return out.view(carried.shape)


def write_branch(fused: bool, carried: torch.Tensor, weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """``carried + weights ⊗ update`` as one CPU autograd node (:func:`~.fused_hyper_connections.fused_write`) when
    ``fused`` and :func:`~.fused_hyper_connections.can_fuse` allow it, else :func:`write_streams`: the write of
    every hyper-connection (Hyper-Connections Eq. 5, mHC Eq. 3)."""
    if fused and can_fuse(carried, weights, update):
        return fused_write(carried, weights, update)
    return write_streams(carried, weights, update)


class HyperConnection(nn.Module):
    """The hyper-connection of one branch: ``read`` gives ``h₀`` and ``H'``, ``write`` returns ``Bᵀ y + H'``.

    Parameters (state-dict keys): ``alpha`` ``= [A_m | A_r] ∈ R^{n×(n+1)}`` (the width connections ``WC``, Eq. 7),
    ``beta`` ``= B ∈ R^n``; with ``dynamic=True`` also ``alpha_proj = [W_m | W_r] ∈ R^{d×(n+1)}``,
    ``alpha_scale = s_α``, ``beta_proj = W_β ∈ R^d``, ``beta_scale = s_β``. ``reset_parameters`` sets Eq. 14 for
    sub-layer ``layer_index``.
    """

    owns_init = True
    #: The static part gets no weight decay (§4 "Implementation"); ``beta`` is 1-D and exempt anyway.
    no_weight_decay_names = ("alpha", "beta")
    #: Take the CPU's one-node read and write where they apply; ``False`` on an instance keeps the separate
    #: operations everywhere (the same values: the baseline of ``benchmarks/bench_hc.py --separate``).
    fused = True

    def __init__(self, dim: int, expansion_rate: int, layer_index: int, dynamic: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        n = check_expansion_rate(expansion_rate)
        factory = {"device": device, "dtype": dtype}
        self.dim, self.expansion_rate, self.layer_index, self.dynamic = dim, n, layer_index, dynamic
        self.alpha = nn.Parameter(torch.empty(n, n + 1, **factory))
        self.beta = nn.Parameter(torch.empty(n, **factory))
        if dynamic:
            self.alpha_proj = nn.Parameter(torch.empty(dim, n + 1, **factory))
            self.alpha_scale = nn.Parameter(torch.empty(1, **factory))
            self.beta_proj = nn.Parameter(torch.empty(dim, **factory))
            self.beta_scale = nn.Parameter(torch.empty(1, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Eq. 14: ``A_m = e_{k mod n}``, ``A_r = I``, ``B = 1``; dynamic projections 0, scales 0.01."""
        n = self.expansion_rate
        with torch.no_grad():
            self.alpha.zero_()
            self.alpha[self.layer_index % n, 0] = 1.0
            self.alpha[:, 1:].copy_(torch.eye(n, device=self.alpha.device, dtype=self.alpha.dtype))
            self.beta.fill_(1.0)
            if self.dynamic:
                self.alpha_proj.zero_()
                self.beta_proj.zero_()
                self.alpha_scale.fill_(DYNAMIC_SCALE_INIT)
                self.beta_scale.fill_(DYNAMIC_SCALE_INIT)

    def coefficients(self, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(WC, B)``: ``(n, n+1)`` and ``(n,)`` (static), or per token ``(..., n, n+1)``, ``(..., n)``
        (Eqs. 10–13)."""
        if not self.dynamic:
            return self.alpha, self.beta
        alpha_t, beta = self._dynamic_coefficients(stream.reshape(-1, self.dim))
        return alpha_t.transpose(-1, -2).reshape(*stream.shape[:-2], *self.alpha.shape), beta.view(stream.shape[:-1])

    def _dynamic_coefficients(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(WCᵀ, B)`` of Eqs. 10–13 for the stream rows ``(tokens·n, d)``: ``(tokens, n+1, n)``, ``(tokens, n)``.

        ``WCᵀ`` comes out transposed and contiguous: the layout the batched product of :meth:`read` and its
        backward run fastest on. The three projections ``W_m, W_r, W_β`` are one product, written as
        ``[W_m | W_r | W_β]ᵀ H̄ᵀ`` so that both it and the gradient of the weights are one wide, short GEMM
        (``(n+2) × tokens·n``) instead of a skinny one (``tokens·n × (n+2)``), several times slower on the CPU.
        """
        n = self.expansion_rate
        weight_t = torch.cat((self.alpha_proj.t(), self.beta_proj.unsqueeze(0)))  # (n+2, d), row-major
        projected = layer_norm_projection(rows, weight_t).to(rows.dtype)  # H̄ W without writing H̄
        dynamic = torch.tanh(projected).view(n + 2, -1, n)  # [j, token, k] = tanh(H̄ W)[token, k, j]
        alpha_t = (self.alpha.t() + self.alpha_scale * dynamic[:-1].transpose(0, 1)).contiguous()  # (tokens, n+1, n)
        return alpha_t, self.beta + self.beta_scale * dynamic[-1]

    def read(self, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(h₀, H', B)`` for ``stream`` ``(..., n, d)``: ``[h₀; H'] = WCᵀ H`` (Eqs. 3–4) in one product.

        Dynamic form: one ``(n+1) × n`` matrix per token, one batched product over the flattened tokens; static
        form: the same matrix broadcast over the tokens (a batch stride of 0, no copy). On the CPU in float32 and
        float64 (autocast off, not under a compiler or ``torch.func``) the read is one autograd node with its
        backward written out (:func:`~.fused_hyper_connections.fused_read`); elsewhere the operations below.
        """
        if stream.shape[-2:] != (self.expansion_rate, self.dim):
            raise ValueError(f"hyper-connection expected a stream (..., {self.expansion_rate}, {self.dim}), got "
                             f"{tuple(stream.shape)}; expand the embedding with the method's expand_stream first")
        if self.fused:
            params = ((self.alpha, self.beta, self.alpha_proj, self.alpha_scale, self.beta_proj, self.beta_scale)
                      if self.dynamic else (self.alpha,))
            if can_fuse(stream, *params):  # the CPU: one autograd node, the same values (fused_hyper_connections)
                return fused_read(stream, *params) if self.dynamic else (*fused_read(stream, self.alpha), self.beta)
        n, tokens = self.expansion_rate, stream.shape[:-2]
        rows = stream.reshape(-1, self.dim)  # a view, except for the expanded embedding (copied once, here)
        if self.dynamic:
            alpha_t, beta = self._dynamic_coefficients(rows)
            beta = beta.view(*tokens, n)
        else:
            alpha_t, beta = self.alpha.t().expand(rows.shape[0] // n, n + 1, n), self.beta
        mixed = torch.bmm(alpha_t, rows.view(-1, n, self.dim)).view(*tokens, n + 1, self.dim)
        branch_input, carried = mixed.split((1, n), dim=-2)  # split: one concatenation backward
        # The branch keeps its input for its backward; a copy of that one row lets the n carried rows of ``mixed``
        # be freed as soon as ``write`` has used them (less memory held per branch, fewer fresh pages per step).
        return branch_input.squeeze(-2).clone(), carried, beta

    def write(self, carried: torch.Tensor, beta: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """``Ĥ = Bᵀ update + H'`` (Eq. 5): the branch output added to stream ``j`` with weight ``B_j``
        (:func:`~.fused_hyper_connections.fused_write` where :func:`~.fused_hyper_connections.can_fuse`, else
        :func:`write_streams`)."""
        return write_branch(self.fused, carried, beta, update)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, expansion_rate={self.expansion_rate}, layer_index={self.layer_index}, "
                f"dynamic={self.dynamic}")


class HyperConnections(ResidualMethod):
    """Dynamic Hyper-Connections (DHC, the paper's default): ``n`` streams, input-dependent ``A_m, A_r, B``.

    Each branch keeps its Pre-LN norm (``norm{i}``) and gains ``stream_mix{i}`` (:class:`HyperConnection`, keys
    ``stream_mix{i}.alpha`` etc.). ``expansion_rate`` ``n`` (default 4, the paper's choice; 2–8 studied) is set per
    instance: ``residual=HyperConnections(expansion_rate=2)``. The model expands the embedding to ``n`` copies,
    sums the streams before the final norm and head (:meth:`expand_stream`, :meth:`reduce_stream`). The layer
    index ``k`` of Eq. 14 counts sub-layers (:func:`sublayer_index`); in CaiT the class-attention stage continues
    the count on the class token's own ``n`` streams, its keys/values being the summed patch streams.
    ``init_value`` ignored; ``ls_placement`` must stay ``"both"``.
    """

    name = "hc"
    dynamic = True

    def __init__(self, expansion_rate: int = 4) -> None:
        self.num_streams = check_expansion_rate(expansion_rate)

    def stream_mix(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return HyperConnection(ctx.dim, self.num_streams, sublayer_index(ctx, branch), dynamic=self.dynamic)

    def expand_stream(self, x: torch.Tensor) -> torch.Tensor:
        return expand_streams(x, self.num_streams)

    def reduce_stream(self, stream: torch.Tensor) -> torch.Tensor:
        return sum_streams(stream)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(expansion_rate={self.num_streams})"


class StaticHyperConnections(HyperConnections):
    """Static Hyper-Connections (SHC): learnable ``A_m, A_r, B`` that do not depend on the input (§2.1, Eqs. 1–5).

    With ``expansion_rate=1`` and the initialisation of Eq. 14 the method is Pre-LN exactly (``HC = [[0, 1], [1, 1]]``,
    Eq. 15): ``h₀ = H``, ``H' = H``, ``Ĥ = T(h₀) + H``.
    """

    name = "hc_static"
    dynamic = False
