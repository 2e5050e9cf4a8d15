"""Full Attention Residuals (Kimi Team 2026, "Attention Residuals", arXiv 2603.15031).

Every layer reads a softmax-weighted mix of *all* earlier layer outputs instead of their running sum::

    h_l = Σ_{i=0}^{l-1} α_{i→l} · v_i,      α_{i→l} = softmax_i( w_lᵀ RMSNorm(v_i) )

with ``v_0`` the token embedding, ``v_i = f_i(h_i)`` the output of layer ``i`` and ``w_l ∈ R^d`` one learned
pseudo-query per layer (keys are the values themselves, normalised; no ``1/√d`` temperature). A "layer" is one
sub-layer — the attention branch and the MLP branch are separate layers with separate pseudo-queries and key
norms, as in the official pseudocode (``attn_res_proj`` / ``attn_res_norm`` before attention, ``mlp_res_proj`` /
``mlp_res_norm`` before the MLP). Each branch keeps its own Pre-LN norm inside ``f_i`` (``f_i(h) = F(norm(h))``).

Sources (read 2026-12-06): the official repository's README and PyTorch-style pseudocode (github.com/MoonshotAI/
Attention-Residuals, reproduced at https://openlm.ai/attention-residuals and
https://nowletus.com/news/attention-residuals-now1338.html: ``K = norm(V)``, ``logits = einsum('d, n b t d -> n
b t', proj.weight.squeeze(), K)``, ``h = einsum('n b t, n b t d -> b t d', logits.softmax(0), V)``); the technical
report's abstract (https://arxiv.org/abs/2603.15031); its definitions ``v_0 = h_1`` (the embedding) and
``φ(q, k) = exp(qᵀ RMSNorm(k))`` as summarised at https://www.winter-prosper.com/digest/attention-residuals-mechanism.

Initialisation: ``w_l = 0``, so every layer starts from the uniform average of the earlier values (the report,
§5: "all pseudo-query vectors must be initialized to zero"), the key norm's weight ``g = 1``.

Output: "the final output layer aggregates all N block representations" (the report, §3.2): the head reads
``h_{L+1} = Σ_i α_{i→L+1} v_i`` over every source, by the same operation with a pseudo-query and key norm of its
own (the model's ``stream_reduce``, :meth:`AttentionResiduals.stream_reduction`; zero-initialised, so it starts
from the uniform average), then the model's final norm. Until 2026-12-07 the head read the plain sum ``Σ_i v_i``,
the same direction at initialisation but with no way to re-weight depth at the output.

Choices where the sources are silent (docs/methods.md, "AttnRes"): the key norm is an RMSNorm *with* a learnable
weight ``g`` (the pseudocode passes an ``RMSNorm`` module per layer) and ``eps = 1e-6`` (the project's norm eps).

Memory: the stream carries every value, ``2L + 1`` tensors of the token shape for ``L`` transformer blocks (the
paper's ``O(Ld)``, its ``L`` counting sub-layers). Block AttnRes (:mod:`.attnres_block`) carries at most ``N + 1``.

The stream passed between blocks is a tuple of the values ``(v_0, ..., v_{l-1})``; a new tuple is returned by
every write (never mutated), so activation checkpointing may re-run a block. :func:`depth_attention` computes
``h_l`` without keeping a stacked copy of the values for the backward (it saves references to the values, which
the stream holds anyway, and three numbers per source and token: the weights ``α``, ``1/rms`` and ``w·v``).
"""

from __future__ import annotations

import torch
from torch import nn

from ..autocast import without_autocast
from ..base import BlockContext, Branch, ResidualMethod

__all__ = ["AttentionResiduals", "DepthAttention", "depth_attention", "sum_sources"]

#: ε of the RMSNorm on the keys (the project's norm eps; the sources do not state one).
KEY_NORM_EPS = 1e-6


class _DepthAttention(torch.autograd.Function):
    """``h = Σ_i α_i v_i``, ``α = softmax_i(r_i · v_i·q)``, ``r_i = 1/√(mean(v_i²) + eps)``; backward by hand.

    With ``s_i = v_i·q``, ``z_i = r_i s_i`` and ``G = ∂L/∂h``: ``∂L/∂α_i = G·v_i``,
    ``∂L/∂z = α ⊙ (∂L/∂α − Σ_j α_j ∂L/∂α_j)``, ``∂L/∂v_i = α_i G + (∂L/∂z_i r_i) q − (∂L/∂z_i s_i r_i³ / d) v_i``
    and ``∂L/∂q = Σ_{i, tokens} ∂L/∂z_i r_i v_i``. Every pass reads the sources one at a time as ``(tokens, d)``
    matrices (a matrix-vector product for the scores, one norm, one multiply-add into ``h``; in the backward one
    dot product per token, one gradient built in place, one matrix-vector product for ``∂L/∂q``): no stacked
    ``(..., n, d)`` copy is ever made (with one, a CPU training step of 32 blocks of width 64 took 2.23× as long;
    benchmarks/README.md, "AttnRes's depth aggregation"). The per-source numbers (``α``, ``r``, ``s``) are
    ``(n, tokens)``.
    """

    @staticmethod
    def forward(ctx, query: torch.Tensor, eps: float, *sources: torch.Tensor) -> torch.Tensor:
        dim = query.shape[-1]
        rows = [source.reshape(-1, dim) for source in sources]
        scores = torch.stack([values @ query for values in rows])
        norms = torch.stack([torch.linalg.vector_norm(values, dim=-1) for values in rows])
        inv_rms = torch.rsqrt(norms.square() / dim + eps)
        weights = torch.softmax(scores * inv_rms, dim=0)
        out = rows[0] * weights[0].unsqueeze(-1)
        for values, weight in zip(rows[1:], weights[1:]):
            out.addcmul_(values, weight.unsqueeze(-1))
        ctx.save_for_backward(query, weights, inv_rms, scores, *sources)
        return out.reshape(sources[0].shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        query, weights, inv_rms, scores, *sources = ctx.saved_tensors
        dim = query.shape[-1]
        grad_out = grad.reshape(-1, dim)
        rows = [source.reshape(-1, dim) for source in sources]
        grad_weights = torch.stack([torch.linalg.vecdot(values, grad_out) for values in rows])
        grad_logits = weights * (grad_weights - (weights * grad_weights).sum(0, keepdim=True))
        grad_scores = grad_logits * inv_rms  # ∂L/∂s_i
        coeff_values = -grad_scores * scores * inv_rms.square() / dim
        grad_query = torch.zeros_like(query) if ctx.needs_input_grad[0] else None
        grad_sources = []
        for source, values, weight, grad_score, coeff in zip(sources, rows, weights, grad_scores, coeff_values):
            grad_values = grad_out * weight.unsqueeze(-1)
            grad_values.addcmul_(values, coeff.unsqueeze(-1)).addr_(grad_score, query)
            grad_sources.append(grad_values.reshape(source.shape))
            if grad_query is not None:
                grad_query.addmv_(values.t(), grad_score)
        return (grad_query, None, *grad_sources)


def depth_attention(query: torch.Tensor, sources: tuple[torch.Tensor, ...], eps: float = KEY_NORM_EPS) -> torch.Tensor:
    """``Σ_i softmax_i(q · v_i / rms(v_i)) v_i`` over the sources ``v_i`` (each ``(..., d)``), ``q`` of shape ``(d,)``.

    ``q`` is the pseudo-query times the key norm's weight (``wᵀ (g ⊙ v / rms(v)) = (w ⊙ g)ᵀ v / rms(v)``). Runs in
    the promoted dtype of its inputs, float32 at least, outside autocast, and returns the promoted dtype of its
    inputs (bfloat16 in a bfloat16 model, whose next norm expects it; float32 under autocast, where the embedding
    source is float32).
    """
    dtype = query.dtype
    for source in sources:
        dtype = torch.promote_types(dtype, source.dtype)
    with without_autocast(query.device.type):
        work = torch.promote_types(torch.float32, dtype)
        return _DepthAttention.apply(query.to(work), eps, *(s.to(work) for s in sources)).to(dtype)


def sum_sources(stream: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The plain sum of the stream's tensors: what the head reads (the ordinary residual stream)."""
    if not isinstance(stream, tuple) or not stream:
        raise ValueError(f"an AttnRes stream is a non-empty tuple of tensors, got {type(stream).__name__}; expand "
                         f"the embedding with the method's expand_stream first")
    total = stream[0]
    for source in stream[1:]:
        total = total + source
    return total


class DepthAttention(nn.Module):
    """The AttnRes connection of one sub-layer: ``read`` gives ``h_l``, ``write`` records the sub-layer's output.

    Keys ``pseudo_query`` (``w_l``, zero-initialised) and ``key_norm_weight`` (``g``, the key RMSNorm's weight,
    initialised to 1). ``starts_source``: whether the output becomes a new source (Full AttnRes: always; Block
    AttnRes: at the first layer of a group) or is added to the last source (the group's partial sum).
    """

    owns_init = True

    def __init__(self, dim: int, starts_source: bool = True, eps: float = KEY_NORM_EPS, device=None,
                 dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.dim, self.starts_source, self.eps = dim, bool(starts_source), eps
        self.pseudo_query = nn.Parameter(torch.empty(dim, **factory))
        self.key_norm_weight = nn.Parameter(torch.empty(dim, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``w_l = 0`` (uniform weights at the start), ``g = 1``."""
        with torch.no_grad():
            self.pseudo_query.zero_()
            self.key_norm_weight.fill_(1.0)

    def weights(self, stream: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``α_{i→l}`` of shape ``(n, ...)`` for the stream's ``n`` sources (for inspection and tests)."""
        values = torch.stack(stream)
        keys = values * torch.rsqrt(values.square().mean(-1, keepdim=True) + self.eps) * self.key_norm_weight
        return torch.softmax(keys @ self.pseudo_query, dim=0)

    def forward(self, stream: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``h_l`` alone: the output aggregation the head reads (:meth:`AttentionResiduals.stream_reduction`)."""
        return self.read(stream)[0]

    def read(self, stream: tuple[torch.Tensor, ...]):
        """``(h_l, stream, None)``: the branch input and the sources carried to :meth:`write`."""
        if not isinstance(stream, tuple) or not stream:
            raise ValueError(f"AttnRes expected its stream, a non-empty tuple of tensors, got "
                             f"{type(stream).__name__}; expand the embedding with the method's expand_stream first")
        if stream[0].shape[-1] != self.dim:
            raise ValueError(f"AttnRes expected sources of width {self.dim}, got {tuple(stream[0].shape)}")
        return depth_attention(self.pseudo_query * self.key_norm_weight, stream, self.eps), stream, None

    def write(self, carried: tuple[torch.Tensor, ...], weights, update: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """A new stream: ``update`` appended as a source, or added to the last source (a group's partial sum).

        A stream holding only its first source (``b_0``, the embedding) always gains a new one, so that the
        embedding stays a source of its own (CaiT's class-attention stage starts such a stream mid-stack).
        """
        if self.starts_source or len(carried) == 1:
            return (*carried, update)
        # the partial sum is the residual stream inside a group: it adds at the embedding's precision at least, as
        # the ordinary stream does (float32 under autocast, not the bfloat16 of the branch outputs)
        partial = carried[-1].to(torch.promote_types(carried[0].dtype, carried[-1].dtype))
        return (*carried[:-1], partial + update)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, starts_source={self.starts_source}"


class AttentionResiduals(ResidualMethod):
    """Full AttnRes: every sub-layer attends over the embedding and every earlier sub-layer's output.

    Each branch keeps its Pre-LN norm (``norm{i}``) and gains ``stream_mix{i}`` (:class:`DepthAttention`, keys
    ``stream_mix{i}.pseudo_query`` and ``stream_mix{i}.key_norm_weight``). The model turns the embedding into the
    one-source stream ``(v_0,)`` (:meth:`expand_stream`) and reads its head input by one more
    :class:`DepthAttention` over every source, ``stream_reduce`` (:meth:`stream_reduction`, keys
    ``stream_reduce.pseudo_query`` and ``stream_reduce.key_norm_weight``), before its final norm. ``init_value``
    is ignored; ``ls_placement`` must stay ``"both"``. In CaiT the class-attention stage starts its own stream from
    the class token, as with Hyper-Connections, and ``stream_reduce`` reads both streams (the patches before class
    attention, the class token before the head).
    """

    name = "attnres"
    #: The stream holds a growing number of sources (not a fixed ``n``); > 1 marks it as multi-stream.
    num_streams = 2

    def starts_source(self, ctx: BlockContext, branch: Branch) -> bool:
        """Whether the output of ``branch`` in the block ``ctx`` becomes a new source: always, in Full AttnRes."""
        return True

    def stream_mix(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return DepthAttention(ctx.dim, self.starts_source(ctx, branch))

    def expand_stream(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x,)

    def reduce_stream(self, stream: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The plain sum of the sources: only where no model holds the output aggregation
        (:meth:`stream_reduction`), which a model built with this method always does."""
        return sum_sources(stream)

    def stream_reduction(self, dim: int) -> nn.Module:
        """The output aggregation ``h_{L+1}`` (the report, §3.2): a :class:`DepthAttention` over every source."""
        return DepthAttention(dim)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
