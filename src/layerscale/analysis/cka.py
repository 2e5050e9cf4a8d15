"""Linear centred kernel alignment (CKA) between representations.

Kornblith, Norouzi, Lee, Hinton 2019, "Similarity of Neural Network Representations Revisited" (arXiv 1905.00414),
the linear-kernel form: with ``X ∈ R^{m×p}``, ``Y ∈ R^{m×q}`` (``m`` examples, each matrix centred column-wise),

    CKA(X, Y) = ‖Yᵀ X‖_F² / (‖Xᵀ X‖_F · ‖Yᵀ Y‖_F).

It is 1 for identical representations and invariant to orthogonal transforms and isotropic scaling of either one
(not to arbitrary invertible linear maps). Computed in float64.
"""

from __future__ import annotations

import math

import torch

__all__ = ["linear_cka", "cka_matrix"]


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
    hsic = torch.empty(layers, layers, dtype=torch.float64)
    rows = max(1, chunk_elements // max(1, layers * width * width))
    for start in range(0, layers, rows):
        stop = min(layers, start + rows)
        block = stacked[:, start * width:stop * width].T @ stacked  # ((stop-start)·p, L·p)
        hsic[start:stop] = block.reshape(stop - start, width, layers, width).pow(2).sum(dim=(1, 3))
    self_norm = hsic.diagonal().sqrt()
    denominator = self_norm[:, None] * self_norm[None, :]
    return torch.where(denominator > 0, hsic / denominator.clamp_min(1e-300), torch.full_like(hsic, math.nan))
