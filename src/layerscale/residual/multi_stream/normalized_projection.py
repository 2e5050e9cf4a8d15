"""``W · LayerNorm(x)`` for many rows and a few outputs, without writing the normalised rows.

The dynamic Hyper-Connections coefficients (HC Eqs. 10–13, :mod:`.hyper_connections`) project every stream row
``x ∈ R^d`` after a LayerNorm without affine parameters onto ``m = n + 2`` outputs::

    z = W x̂,    x̂ = (x − μ) ρ,    μ = mean(x),    ρ = 1 / sqrt(var(x) + ε)        (var without correction)

With ``c = W 1`` (the row sums of ``W``) this is ``z = (W x − c μ) ρ``: one product on the rows as they are plus
two numbers per row, where ``LayerNorm`` then ``W`` writes and reads a normalised copy of the ``n``-times wider
stream and keeps it for the backward. The backward is the LayerNorm backward of ``u = Wᵀ g`` with its two row means
in closed form (``mean(u) = cᵀg / d``, ``mean(u ∘ x̂) = gᵀz / d``)::

    ∂L/∂x = ρ u − ρ cᵀg / d − ρ² (gᵀz / d) (x − μ)
    ∂L/∂W = Σ_rows (ρ g) xᵀ − (Σ_rows ρ g μ) 1ᵀ

again products on ``x`` itself. Rounding: ``W x − c μ`` and ``mean(x²) − μ²`` cancel where a row's mean is large against
its spread (``|μ| ≫ σ``); the relative error then grows like ``|μ| / σ`` (and ``(|μ| / σ)²`` for the variance)
times float32's, where the two-pass LayerNorm's does not — at ``|μ| = 10 σ`` it is 1e-5, harmless for the small
``tanh`` arguments of the coefficients; float64 inputs stay float64. Inside, the
computation runs in float32 at least, with autocast off (the products are a few outputs wide).

Where: on the CPU where Hyper-Connections take the separate operations (reduced precision, autocast, compilers,
``fused = False``; in float32 and float64 :mod:`.fused_hyper_connections` folds the same LayerNorm with centred
weights inside its one-node read), where it was measured (``benchmarks/README.md``, "The coefficient LayerNorm
folded into its projection": the ``hc`` step 1.43× → 1.35× ``prenorm`` at width 192, activation memory −22 %).
Off the CPU the plain ``F.layer_norm`` then the product: there the model is bound by kernel launches (one H200,
``benchmarks/README.md``), and the fold's reductions are more launches, not less traffic that matters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ..autocast import without_autocast

__all__ = ["LAYER_NORM_EPS", "layer_norm_projection"]

#: ``F.layer_norm``'s default ε, the LayerNorm the coefficients use.
LAYER_NORM_EPS = 1e-5


def _row_statistics(rows: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(μ, ρ)`` per row: the mean and ``1 / sqrt(var + eps)``, ``var = mean(x²) − μ²`` (over ``d``, no
    correction; clamped at 0 against rounding). Two plain reductions: ``torch.var_mean`` over rows took 7× a whole
    ``F.layer_norm`` on the CPU (torch 2.14, rows of 192)."""
    width = rows.shape[1]
    mean = rows.sum(dim=1) / width
    var = (torch.linalg.vector_norm(rows, dim=1).square() / width - mean.square()).clamp_min(0)
    return mean, torch.rsqrt(var + eps)


def _project(rows: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor) -> torch.Tensor:
    """``(W xᵀ − c μᵀ) ρ``: ``(m, rows)``."""
    return (weight @ rows.t() - weight.sum(dim=1, keepdim=True) * mean) * rstd


class _LayerNormProjection(torch.autograd.Function):
    """The fold of the module docstring with its hand-written backward (nothing of size ``rows × d`` is saved
    beyond ``rows`` itself, which the caller keeps anyway)."""

    @staticmethod
    def forward(ctx, rows, weight, eps):
        mean, rstd = _row_statistics(rows, eps)
        z = _project(rows, weight, mean, rstd)
        ctx.save_for_backward(rows, weight, mean, rstd, z)
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        rows, weight, mean, rstd, z = ctx.saved_tensors
        width = rows.shape[1]
        grad_rstd = grad * rstd  # (m, rows): ρ g
        grad_rows = grad_weight = None
        if ctx.needs_input_grad[0]:
            mean_u = (weight.sum(dim=1) @ grad) / width  # cᵀg / d per row
            mean_u_xhat = (grad * z).sum(dim=0) / width  # gᵀz / d per row
            slope = -rstd * rstd * mean_u_xhat  # the coefficient of x
            offset = -(slope * mean) - rstd * mean_u
            grad_rows = torch.addmm(offset.unsqueeze(1), grad_rstd.t(), weight)
            grad_rows.addcmul_(rows, slope.unsqueeze(1))
        if ctx.needs_input_grad[1]:
            grad_weight = torch.addmm(-(grad_rstd @ mean).unsqueeze(1), grad_rstd, rows)
        return grad_rows, grad_weight, None


def layer_norm_projection(rows: torch.Tensor, weight: torch.Tensor, eps: float = LAYER_NORM_EPS) -> torch.Tensor:
    """``W · LayerNorm(rows)ᵀ`` (LayerNorm without affine, ``eps`` as ``F.layer_norm``): ``rows`` ``(N, d)``,
    ``weight`` ``(m, d)`` → ``(m, N)``, in the promoted dtype of the inputs and at least float32.

    On the CPU with a gradient, the hand-written backward; under ``torch.compile`` or a ``torch.func`` transform the
    same formula is differentiated by autograd; off the CPU, ``F.layer_norm`` then the product.
    """
    if rows.dim() != 2 or weight.dim() != 2 or rows.shape[1] != weight.shape[1]:
        raise ValueError(f"layer_norm_projection expects rows (N, d) and weight (m, d), got {tuple(rows.shape)} "
                         f"and {tuple(weight.shape)}")
    dtype = torch.promote_types(torch.promote_types(rows.dtype, weight.dtype), torch.float32)
    rows, weight = rows.to(dtype), weight.to(dtype)
    with without_autocast(rows.device.type):
        if rows.device.type != "cpu":
            return weight @ F.layer_norm(rows, (rows.shape[1],), eps=eps).t()
        if (torch.is_grad_enabled() and (rows.requires_grad or weight.requires_grad)
                and not torch.compiler.is_compiling() and not torch._C._are_functorch_transforms_active()):
            return _LayerNormProjection.apply(rows, weight, eps)
        mean, rstd = _row_statistics(rows, eps)
        return _project(rows, weight, mean, rstd)
