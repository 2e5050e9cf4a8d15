"""Linear centred kernel alignment (CKA) between representations.

Kornblith, Norouzi, Lee, Hinton 2019, "Similarity of Neural Network Representations Revisited" (arXiv 1905.00414),
the linear-kernel form: with ``X ∈ R^{m×p}``, ``Y ∈ R^{m×q}`` (``m`` examples, each matrix centred column-wise),

    CKA(X, Y) = ‖Yᵀ X‖_F² / (‖Xᵀ X‖_F · ‖Yᵀ Y‖_F).

It is 1 for identical representations and invariant to orthogonal transforms and isotropic scaling of either one
(not to arbitrary invertible linear maps). Computed in float64.

**Debiased CKA** (Nguyen, Raghu, Kornblith 2021, "Do Wide and Deep Networks Learn the Same Things?", arXiv
2010.15327, Appendix; the plain estimate is biased upwards when the width is comparable to the number of examples)
replaces each HSIC by Song et al.'s unbiased estimator (Song, Smola, Gretton, Bedo, Borgwardt 2012, "Feature
Selection via Dependence Maximization", JMLR 13): with ``K = XXᵀ``, ``L = YYᵀ`` and ``K̃``, ``L̃`` the same
with zeroed diagonals, for ``n ≥ 4`` examples

    HSIC_u(K, L) = [tr(K̃L̃) + 1ᵀK̃1 · 1ᵀL̃1 / ((n−1)(n−2)) − 2/(n−2) · 1ᵀK̃L̃1] / (n(n−3)),

and ``CKA_u = HSIC_u(K, L) / √(HSIC_u(K, K) · HSIC_u(L, L))``. It is computed from the features, never forming an
``n × n`` kernel: ``tr(K̃L̃) = ‖XᵀY‖_F² − Σ_i ‖x_i‖²‖y_i‖²``, ``1ᵀK̃1 = ‖Σ_i x_i‖² − Σ_i ‖x_i‖²`` and
``K̃1 = X(Xᵀ1) − (‖x_i‖²)_i``. Near 0 for independent representations, where the plain estimate is not.
"""

from __future__ import annotations

import math

import torch

__all__ = ["CKA_KINDS", "linear_cka", "cka_matrix", "debiased_cka_matrix"]

CKA_KINDS = ("linear", "debiased")


def _centred(x: torch.Tensor, what: str) -> torch.Tensor:
    if x.dim() != 2:
        raise ValueError(f"linear CKA needs {what} as a matrix (examples, features), got shape {tuple(x.shape)}")
    x = x.double()
    return x - x.mean(dim=0, keepdim=True)


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA of ``x`` ``(m, p)`` and ``y`` ``(m, q)`` (see the module docstring); NaN (undefined) when either
    is constant over the examples."""
    if x.dim() != 2 or y.dim() != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"linear CKA needs two matrices with the same number of rows (examples), got "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    xc, yc = _centred(x, "x"), _centred(y, "y")
    denominator = torch.linalg.matrix_norm(xc.T @ xc) * torch.linalg.matrix_norm(yc.T @ yc)
    if float(denominator) == 0.0:
        return math.nan
    return float(torch.linalg.matrix_norm(yc.T @ xc) ** 2 / denominator)


def cka_matrix(features: torch.Tensor, chunk_elements: int = 1 << 24) -> torch.Tensor:
    """``(L, L)`` linear CKA between every pair of ``features[:, l, :]`` for ``features`` of shape ``(m, L, p)``.

    Uses one cross-product ``Aᵀ A`` of the stacked centred features ``A = [X_1 … X_L]`` (``m × L·p``), computed a
    row-chunk at a time so that at most about ``chunk_elements`` float64 values are held at once. Pairs involving
    a constant representation are NaN (undefined).
    """
    if features.dim() != 3:
        raise ValueError(f"cka_matrix needs features of shape (examples, layers, width), got {tuple(features.shape)}")
    m, layers, width = features.shape
    stacked = _centred(features.reshape(m, layers * width), "features")
    hsic = _cross_norms(stacked, layers, width, chunk_elements)
    self_norm = hsic.diagonal().sqrt()
    denominator = self_norm[:, None] * self_norm[None, :]
    return torch.where(denominator > 0, hsic / denominator.clamp_min(1e-300), torch.full_like(hsic, math.nan))


def _cross_norms(stacked: torch.Tensor, layers: int, width: int, chunk_elements: int) -> torch.Tensor:
    """``(L, L)``: ``‖X_lᵀ X_m‖_F²`` for the column blocks ``X_l`` of ``stacked`` (``m × L·p``), a row-chunk of
    ``Aᵀ A`` at a time."""
    out = torch.empty(layers, layers, dtype=torch.float64)
    rows = max(1, chunk_elements // max(1, layers * width * width))
    for start in range(0, layers, rows):
        stop = min(layers, start + rows)
        block = stacked[:, start * width:stop * width].T @ stacked  # ((stop-start)·p, L·p)
        out[start:stop] = block.reshape(stop - start, width, layers, width).pow(2).sum(dim=(1, 3))
    return out


def debiased_cka_matrix(features: torch.Tensor, chunk_elements: int = 1 << 24) -> torch.Tensor:
    """``(L, L)`` debiased linear CKA (module docstring) between every pair of ``features[:, l, :]`` for features
    ``(m, L, p)`` with ``m ≥ 4``; NaN where an unbiased self-HSIC is not positive (undefined)."""
    if features.dim() != 3:
        raise ValueError(f"debiased_cka_matrix needs features of shape (examples, layers, width), got "
                         f"{tuple(features.shape)}")
    n, layers, width = features.shape
    if n < 4:
        raise ValueError(f"debiased CKA needs at least 4 examples, got {n}")
    x = features.double()
    squared = x.pow(2).sum(dim=2)  # (n, L): ‖x_i‖² per layer
    sums = x.sum(dim=0)  # (L, p)
    trace = _cross_norms(x.reshape(n, layers * width), layers, width, chunk_elements) - squared.T @ squared
    ones = sums.pow(2).sum(dim=1) - squared.sum(dim=0)  # 1ᵀK̃1 per layer
    row_sums = torch.einsum("nlp,lp->nl", x, sums) - squared  # K̃1 per layer, (n, L)
    cross = row_sums.T @ row_sums  # 1ᵀK̃L̃1
    hsic = (trace + ones[:, None] * ones[None, :] / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * cross) / (n * (n - 3))
    self_hsic = hsic.diagonal()
    denominator = (self_hsic.clamp_min(0)[:, None] * self_hsic.clamp_min(0)[None, :]).sqrt()
    return torch.where(denominator > 0, hsic / denominator.clamp_min(1e-300), torch.full_like(hsic, math.nan))
