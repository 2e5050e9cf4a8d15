"""The LayerScale residual update ``x + m ⊙ γ ⊙ y`` with a hand-written backward.

Every LayerScale-type block ends each branch with ``out = residual + keep_mask ⊙ γ ⊙ branch`` (``γ`` per channel
or one scalar, ``keep_mask`` the optional per-sample stochastic-depth factor). Written as ``x + gamma * y`` this
costs two passes over memory in the forward and, through autograd, four more in the backward (``grad * gamma``,
``grad * y`` into a full-size temporary, then its reduction). The limit is one read of each input and one write.

:func:`scaled_residual_add` comes close:

* forward: one ``torch.addcmul`` (one read of ``residual`` and ``branch``, one write, no temporary);
* backward (:class:`ScaledResidualAdd`), with ``g`` the incoming gradient and ``s = keep_mask ⊙ γ``::

      ∂residual = g                                   (the same tensor, no copy)
      ∂branch   = g ⊙ s
      ∂γ        = Σ_{all but last dim} keep_mask ⊙ g ⊙ branch     (accumulated in float32 for half types)

  On the CPU, tensors larger than a few MiB per thread are walked in chunks of rows so that a chunk of ``g`` is
  read from memory once for both products and ``g ⊙ branch`` never exists at full size: a full-size temporary
  costs a fresh allocation and page faults there, which is most of the unfused backward's time. Smaller tensors
  take whole-tensor ops (fewest kernels).

On a GPU the hand-written backward does not pay: measured on an H200 (bf16 autocast, ``bench_fused_update.py``,
benchmarks/README.md, 2026-11-30) it took 1.36× the time of autograd's own ``addcmul`` backward at
(64, 197, 768) and was never faster, since its Python ``backward`` costs more launch overhead than the memory passes
it saves. Tensors on any device but the CPU therefore take the plain ``torch.addcmul``.

Only ``branch`` (when ``γ`` needs a gradient), ``γ`` (when ``branch`` needs one) and the small mask are saved, the
same tensors autograd saves for the unfused expression. Under ``torch.compile`` the plain ``addcmul`` is traced
instead, so that the compiler fuses the update with its neighbours. Reference for LayerScale itself: Touvron et al.
2021, "Going deeper with Image Transformers", arXiv 2103.17239.
"""

from __future__ import annotations

import torch

__all__ = ["ScaledResidualAdd", "scaled_residual_add"]

#: Elements per chunk and per intra-op thread in the CPU backward (4 MiB of float32 per thread): small enough that a
#: chunk of ``g`` is still cached for its second use, large enough that each op's thread start-up is amortised.
#: Measured on 2 shared cores, (64, 197, 768): 2^18-2^20 per chunk best with 1 thread, 2^21-2^22 with 2 threads.
CPU_CHUNK_ELEMENTS_PER_THREAD = 1 << 20


def _scale(gamma: torch.Tensor, keep_mask: torch.Tensor | None) -> torch.Tensor:
    return gamma if keep_mask is None else gamma * keep_mask


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _fits_fused_form(residual: torch.Tensor, branch: torch.Tensor, gamma: torch.Tensor,
                     keep_mask: torch.Tensor | None) -> bool:
    """Shapes the hand-written backward covers: equal residual and branch, γ of shape (D,) or (1,), mask (B, 1, ..)."""
    if residual.shape != branch.shape or residual.dim() < 1 or gamma.dim() != 1:
        return False
    if gamma.shape[0] not in (1, residual.shape[-1]) or residual.numel() == 0:
        return False
    if keep_mask is not None:
        expected = (residual.shape[0],) + (1,) * (residual.dim() - 1)
        if residual.dim() < 2 or tuple(keep_mask.shape) != expected or keep_mask.requires_grad:
            return False
    return True


class ScaledResidualAdd(torch.autograd.Function):
    """``residual + keep_mask ⊙ γ ⊙ branch`` whose backward saves and reads only what it needs (see module doc).

    ``apply(residual, branch, gamma, keep_mask)`` with ``residual`` and ``branch`` of equal shape ``(..., D)``,
    ``gamma`` of shape ``(D,)`` or ``(1,)`` and ``keep_mask`` ``None`` or of shape ``(B, 1, ..., 1)``. Call it through
    :func:`scaled_residual_add`, which checks the shapes and picks the inference and compiled paths.
    """

    # The classic ``forward(ctx, ...)`` form: ``apply`` costs ~10 µs per call with it and ~90 µs with a separate
    # ``setup_context`` (measured, torch 2.14); ``torch.func`` transforms never reach this class (see below).
    @staticmethod
    def forward(ctx, residual, branch, gamma, keep_mask):
        _, need_branch, need_gamma, _ = ctx.needs_input_grad
        # Save only what the backward reads: branch for ∂γ, γ for ∂branch.
        ctx.save_for_backward(branch if need_gamma else None, gamma if need_branch else None, keep_mask)
        ctx.residual_dtype, ctx.branch_dtype, ctx.gamma_dtype = residual.dtype, branch.dtype, gamma.dtype
        ctx.gamma_shape = gamma.shape
        return torch.addcmul(residual, branch, _scale(gamma, keep_mask))

    @staticmethod
    def backward(ctx, grad):
        branch, gamma, keep_mask = ctx.saved_tensors
        need_residual, need_branch, need_gamma, _ = ctx.needs_input_grad
        d_residual = grad.to(ctx.residual_dtype) if need_residual else None
        if not (need_branch or need_gamma):
            return d_residual, None, None, None
        width = grad.shape[-1]
        rows = grad.numel() // width
        acc_dtype = _accumulation_dtype(torch.promote_types(grad.dtype, ctx.gamma_dtype))
        step = max(1, CPU_CHUNK_ELEMENTS_PER_THREAD * torch.get_num_threads() // width)
        # create_graph=True (double backward) needs differentiable ops: the chunked path writes through out=.
        if grad.device.type != "cpu" or rows <= step or torch.is_grad_enabled():
            d_branch, d_gamma = _whole_grads(grad, branch, gamma, keep_mask, need_branch, need_gamma, acc_dtype)
        else:
            d_branch, d_gamma = _chunked_grads(grad, branch, gamma, keep_mask, need_branch, need_gamma, acc_dtype,
                                               step)
        if need_branch:
            d_branch = d_branch.to(ctx.branch_dtype)
        if need_gamma:
            d_gamma = d_gamma.sum_to_size(ctx.gamma_shape).to(ctx.gamma_dtype)
        return d_residual, d_branch, d_gamma, None


def _whole_grads(grad, branch, gamma, keep_mask, need_branch, need_gamma, acc_dtype):
    """``(∂branch, ∂γ per channel)`` in whole-tensor ops: fewest kernels, for small tensors and for GPUs."""
    width = grad.shape[-1]
    d_branch = grad * _scale(gamma, keep_mask) if need_branch else None
    d_gamma = None
    if need_gamma:
        product = grad * branch
        if keep_mask is None:
            d_gamma = product.reshape(-1, width).sum(0, dtype=acc_dtype)
        else:  # per-sample sums, then weighted by each sample's keep factor
            per_sample = product.reshape(keep_mask.shape[0], -1, width).sum(1, dtype=acc_dtype)
            d_gamma = (per_sample * keep_mask.reshape(-1, 1)).sum(0)
    return d_branch, d_gamma


def _chunked_grads(grad, branch, gamma, keep_mask, need_branch, need_gamma, acc_dtype, step):
    """``(∂branch, ∂γ per channel)`` walking ``step`` rows at a time (CPU): a chunk of ``grad`` is read from memory
    once for both products, and ``grad ⊙ branch`` exists only one chunk at a time."""
    width = grad.shape[-1]
    g_rows = grad.reshape(-1, width)
    rows = g_rows.shape[0]
    row_weight = None
    if keep_mask is not None:  # one factor per sample, repeated over that sample's rows
        per_sample = rows // keep_mask.shape[0]
        row_weight = keep_mask.reshape(-1, 1, 1).expand(-1, per_sample, 1).reshape(rows, 1).to(grad.dtype)
    out_dtype = torch.promote_types(grad.dtype, gamma.dtype)
    d_branch = torch.empty((rows, width), dtype=out_dtype, device=grad.device) if need_branch else None
    d_gamma = torch.zeros(width, dtype=acc_dtype, device=grad.device) if need_gamma else None
    b_rows = branch.reshape(-1, width) if need_gamma else None
    for start in range(0, rows, step):
        stop = min(start + step, rows)
        g = g_rows[start:stop]
        if row_weight is not None:
            g = g * row_weight[start:stop]
        if need_branch:
            torch.mul(g, gamma, out=d_branch[start:stop])
        if need_gamma:
            d_gamma += (g * b_rows[start:stop]).sum(0, dtype=acc_dtype)
    return (d_branch.view(grad.shape) if need_branch else None), d_gamma


def scaled_residual_add(residual: torch.Tensor, branch: torch.Tensor, gamma: torch.Tensor,
                        keep_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``residual + keep_mask ⊙ γ ⊙ branch``: the residual update of every LayerScale-type branch, fused.

    ``γ`` scales the last dimension (shape ``(D,)``) or everything (shape ``(1,)``); ``keep_mask`` is ``None`` or the
    per-sample stochastic-depth factor of shape ``(B, 1, ..., 1)`` (``0`` or ``1 / (1 - p)``). Results equal the
    unfused expression; the backward is :class:`ScaledResidualAdd`. Inference (no gradient needed), shapes outside
    that contract, tensors not on the CPU (see the module docstring), ``torch.func`` transforms and ``torch.compile``
    take a single ``torch.addcmul``, differentiated by autograd or fused by the compiler.
    """
    if torch.compiler.is_compiling():
        return torch.addcmul(residual, branch, _scale(gamma, keep_mask))
    needs_grad = torch.is_grad_enabled() and (residual.requires_grad or branch.requires_grad or gamma.requires_grad)
    if (not needs_grad or residual.device.type != "cpu" or torch._C._are_functorch_transforms_active()
            or not _fits_fused_form(residual, branch, gamma, keep_mask)):
        return torch.addcmul(residual, branch, _scale(gamma, keep_mask))
    return ScaledResidualAdd.apply(residual, branch, gamma, keep_mask)
