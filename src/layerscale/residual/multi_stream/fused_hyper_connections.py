"""A hyper-connection's ``read`` and ``write`` on the CPU, each one autograd node with its backward written out.

The equations are those of :mod:`.hyper_connections` (Zhu et al. 2024, Eqs. 3–5 and 10–13), for the stream
``X`` ``(T, n, d)`` of ``T`` tokens and ``W = [W_m | W_r | W_β]ᵀ`` ``(n+2, d)``::

    z      = W · LayerNorm(x)  for every stream row x        (LayerNorm without affine, ε = 1e-5)
    WCᵀ    = [A_m | A_r]ᵀ + s_α tanh(z_{m,r})ᵀ   (T, n+1, n);    B = β + s_β tanh(z_β)   (T, n)
    [h₀; H'] = WCᵀ X                              one batched product (read)
    Ĥ      = H' + B ⊗ y                           (write, y the branch output)

The step of a hyper-connection ViT on the CPU is bound by two things at narrow widths: passes over the
``n``-times wider stream, and the count of small operations and autograd nodes (each costs tens of microseconds
there). The separate-operation form spent both: its backward concatenated the gradients of ``h₀`` and ``H'``, wrote
the LayerNorm part and the mix part of ``∂L/∂X`` as two tensors and summed them, and it ran some forty small
operations per branch for the coefficients and their gradients. Here:

- the LayerNorm is folded into the projection with centred rows: ``W (x − μ) = W_c x`` with
  ``W_c = W − mean_row(W) 1ᵀ``, so ``z = ρ · W_c x`` and one product ``X [W_c; 1ᵀ/d]ᵀ`` gives every ``W_c x`` and
  the row means ``μ`` (``ρ = 1/sqrt(mean(x²) − μ² + ε)``, the variance without correction, as ``F.layer_norm``);
  nothing of size ``T·n·d`` is written or kept but the mix;
- the backward forms ``∂L/∂X`` in one buffer: the LayerNorm part ``[ρ g_z | −s μ] [W_c; 1ᵀ]`` (one product;
  ``s = −ρ² (g_z·z)/d`` per row), then ``+ s x`` (``addcmul_``), ``+ A_r g_{H'}`` (``baddbmm_``) and
  ``+ A_m ⊗ g_{h₀}`` (``addcmul_``), all in place; ``∂L/∂WCᵀ`` is two batched products (``g_{h₀} Xᵀ`` and
  ``g_{H'} Xᵀ``, never concatenated);
- the write is one ``addcmul`` (``H' + B ⊗ y``), its backward two batched products.

Same function, other rounding: values and every gradient equal the separate operations' to 1e-12 in float64 and
the paper's equations written out (``tests/residual/test_fused_hyper_connections.py``); in float32 the sums run in
another order (and ``addcmul`` rounds ``H' + B y`` once), so a float32 run is not bitwise the separate operations'
run. Used on the CPU in float32 and float64 with autocast off and outside ``torch.compile`` and ``torch.func``
transforms (:func:`can_fuse`); elsewhere — GPUs (bound by kernel launches, not measured here), reduced precision,
autocast, compilers — the separate operations run. The read's backward is once differentiable (as the folded
LayerNorm projection it replaces was); the write's is twice. Measured: ``benchmarks/README.md``, "The CPU read and
write as one autograd node each (issue 58)".
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

__all__ = ["can_fuse", "fused_read", "fused_write"]

_FUSED_DTYPES = (torch.float32, torch.float64)


def can_fuse(stream: torch.Tensor, *tensors: torch.Tensor) -> bool:
    """Whether :func:`fused_read` / :func:`fused_write` apply to ``stream`` and ``tensors``: all on the CPU in one
    dtype, float32 or float64; autocast off; no ``torch.compile`` / ``torch.export`` or ``torch.jit.trace`` tracing
    (they record the separate operations, which export knows) and no ``torch.func`` transform."""
    dtype = stream.dtype
    return (stream.device.type == "cpu" and dtype in _FUSED_DTYPES
            and all(t.dtype == dtype and t.device.type == "cpu" for t in tensors)
            and not torch.is_autocast_enabled("cpu") and not torch.compiler.is_compiling()
            and not torch.jit.is_tracing() and not torch._C._are_functorch_transforms_active())


class _Read(torch.autograd.Function):
    """``(h₀, H'[, B])`` for ``stream`` ``(..., n, d)``; dynamic when ``alpha_proj`` is given (module docstring)."""

    @staticmethod
    def forward(ctx, stream, alpha, beta, alpha_proj, alpha_scale, beta_proj, beta_scale, eps):
        *lead, n, width = stream.shape
        x = stream.reshape(-1, n, width).contiguous()  # a view, except for the expanded embedding (copied once)
        tokens = x.shape[0]
        ctx.lead, ctx.dynamic = lead, alpha_proj is not None
        if not ctx.dynamic:
            alpha_t = alpha.t().expand(tokens, n + 1, n)
            ctx.save_for_backward(x, alpha_t)
        else:
            m = n + 2
            weight = torch.cat((alpha_proj.t(), beta_proj.unsqueeze(0)))  # W, (m, d)
            right = torch.cat((weight - weight.mean(dim=1, keepdim=True), weight.new_full((1, width), 1 / width)))
            proj = (x.view(-1, width) @ right.t()).view(tokens, n, m + 1)  # [W_c x | μ] per stream row
            mean = proj[..., m]
            var = torch.linalg.vector_norm(x, dim=-1).square_().div_(width).sub_(mean.square()).clamp_min_(0)
            rstd = var.add_(eps).rsqrt_()  # ρ, (T, n)
            z = proj[..., :m].mul(rstd.unsqueeze(-1))  # W · LayerNorm(x), (T, n, m)
            dyn = torch.tanh(z)
            alpha_t = torch.empty(tokens, n + 1, n, dtype=x.dtype)  # WCᵀ, row-major: the fast batched product
            torch.addcmul(alpha.t(), dyn[..., :n + 1].transpose(1, 2), alpha_scale, out=alpha_t)
            beta_out = torch.addcmul(beta, dyn[..., n + 1], beta_scale).view(*lead, n)
            scales = torch.cat((alpha_scale.expand(n + 1), beta_scale))
            tanh_slope = dyn.square().neg_().add_(1).mul_(scales)  # (s_α or s_β) · tanh'(z)
            ctx.save_for_backward(x, alpha_t, right, mean, rstd, z, dyn, tanh_slope)
        mixed = torch.bmm(alpha_t, x)  # (T, n+1, d)
        # The branch keeps its input for its backward: a copy of that one row lets the n carried rows of ``mixed``
        # be freed once ``write`` has used them.
        u = mixed[:, 0].clone().view(*lead, width)
        carried = mixed[:, 1:].view(*lead, n, width)
        return (u, carried, beta_out) if ctx.dynamic else (u, carried)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_u, grad_carried, grad_beta=None):
        x, alpha_t, *saved = ctx.saved_tensors
        tokens, n, width = x.shape
        grad_u = grad_u.reshape(tokens, 1, width)
        grad_carried = grad_carried.reshape(tokens, n, width)
        x_t = x.transpose(1, 2)
        grad_read = torch.bmm(grad_u, x_t)  # (T, 1, n): ∂L/∂(row 0 of WCᵀ)
        grad_mix = torch.bmm(grad_carried, x_t)  # (T, n, n): ∂L/∂(rows 1.. of WCᵀ)
        mix_t = alpha_t[:, 1:].transpose(1, 2)  # A_r per token, (T, n, n)
        read_weight = alpha_t[:, :1].transpose(1, 2)  # A_m per token, (T, n, 1)
        if not ctx.dynamic:
            grad_alpha = torch.cat((grad_read.sum(dim=0), grad_mix.sum(dim=0))).t()
            grad_x = torch.bmm(mix_t, grad_carried)
            grad_x.addcmul_(read_weight, grad_u)
            return grad_x.view(*ctx.lead, n, width), grad_alpha, None, None, None, None, None, None
        right, mean, rstd, z, dyn, tanh_slope = saved
        m = n + 2
        # ∂L/∂tanh(z) per stream row (T, n, m): [s_α-part | s_β-part] before the scales, in z's layout.
        grad_dyn = torch.cat((grad_read.transpose(1, 2), grad_mix.transpose(1, 2),
                              grad_beta.reshape(tokens, n, 1)), dim=-1)
        sums = grad_dyn.sum(dim=0)  # (n, m): ∂L/∂[A_m | A_r] and ∂L/∂β
        scale_sums = (grad_dyn * dyn).sum(dim=(0, 1))  # (m,): ∂L/∂s_α summed over its columns, ∂L/∂s_β
        grad_z = grad_dyn.mul_(tanh_slope)
        # LayerNorm backward with centred rows: ∂L/∂x = (ρ g_z)ᵀ W_c + s (x − μ), s = −ρ² (g_z·z) / d.
        grad_rstd = grad_z * rstd.unsqueeze(-1)
        q = (grad_z * z).sum(dim=-1).mul_(rstd.square())  # −s·d
        left = torch.cat((grad_rstd, (q * mean).unsqueeze(-1)), dim=-1)  # times [W_c; 1ᵀ/d]: −s μ in the last column
        grad_x = (left.view(-1, m + 1) @ right).view(tokens, n, width)
        grad_x.addcmul_(x, q.unsqueeze(-1), value=-1 / width)
        grad_x.baddbmm_(mix_t.contiguous(), grad_carried)
        grad_x.addcmul_(read_weight, grad_u)
        grad_centred = grad_rstd.view(-1, m).t() @ x.view(-1, width)  # ∂L/∂W_c, (m, d)
        grad_weight = grad_centred.sub_(grad_centred.mean(dim=1, keepdim=True))
        return (grad_x.view(*ctx.lead, n, width), sums[:, :n + 1], sums[:, n + 1], grad_weight[:n + 1].t(),
                scale_sums[:n + 1].sum().reshape(1), grad_weight[n + 1], scale_sums[n + 1:], None)


def fused_read(stream: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor | None = None,
               alpha_proj: torch.Tensor | None = None, alpha_scale: torch.Tensor | None = None,
               beta_proj: torch.Tensor | None = None, beta_scale: torch.Tensor | None = None, eps: float = 1e-5):
    """``(h₀, H', B)`` of the dynamic connection (``alpha_proj`` given) or ``(h₀, H')`` of the static one, for
    ``stream`` ``(..., n, d)``: ``(..., d)``, ``(..., n, d)``, ``(..., n)``."""
    return _Read.apply(stream, alpha, beta, alpha_proj, alpha_scale, beta_proj, beta_scale, eps)


class _Write(torch.autograd.Function):
    """``carried + weights ⊗ update``: ``(..., n, d)``, ``(..., n)`` or ``(n,)``, ``(..., d)``. The backward is made
    of differentiable operations, so it has a second derivative (``gradgradcheck`` in the tests)."""

    @staticmethod
    def forward(ctx, carried, weights, update):
        ctx.save_for_backward(weights, update)
        return torch.addcmul(carried, weights.unsqueeze(-1), update.unsqueeze(-2))

    @staticmethod
    def backward(ctx, grad):
        weights, update = ctx.saved_tensors
        *lead, n, width = grad.shape
        g = grad.reshape(-1, n, width)
        grad_weights = grad_update = None
        if ctx.needs_input_grad[1]:
            grad_weights = torch.bmm(g, update.reshape(-1, width, 1))  # (T, n, 1)
            grad_weights = grad_weights.view(*lead, n) if weights.dim() > 1 else grad_weights.sum(dim=(0, 2))
        if ctx.needs_input_grad[2]:
            w = weights.expand(*lead, n).reshape(-1, 1, n)
            grad_update = torch.bmm(w, g).view(update.shape)
        return grad, grad_weights, grad_update


def fused_write(carried: torch.Tensor, weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """``Ĥ = H' + B ⊗ y`` (HC Eq. 5) as one ``addcmul``; the backward is two batched products."""
    return _Write.apply(carried, weights, update)
