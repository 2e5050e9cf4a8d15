"""How far each block moves the residual stream: angular distance and relative update norm.

For the stream ``x_l`` entering block ``l`` and ``x_{l+1}`` leaving it (tensors ``(B, T, D)``):

* **angular distance** ``d(x_l, x_{l+1}) = arccos(cos(x_l[b,t], x_{l+1}[b,t])) / π``, per token, in ``[0, 1]``
  (0: same direction, 0.5: orthogonal, 1: opposite) — the distance of Gromov et al. 2024 ("The Unreasonable
  Ineffectiveness of the Deeper Layers", arXiv 2403.17887), who apply it to the last token only (the token
  the head reads: see :mod:`~layerscale.analysis.pruning.block_ranking`); the analysis also reports its mean over every
  token, under that name (``angular_distance_all_tokens``). The angle is
  computed as ``2·atan2(‖u − v‖, ‖u + v‖)`` on the unit vectors ``u, v`` (Kahan's form), which is exact near 0
  where ``arccos`` of a rounded cosine is not: an identity block gives exactly 0.
* **relative update norm** ``‖x_{l+1} − x_l‖_F / ‖x_l‖_F`` per example (over its tokens and channels), the size of
  the block's whole update against the stream it is added to (compare CaiT's per-layer branch-to-stream ratio,
  Touvron et al. 2021, Fig. 5).
"""

from __future__ import annotations

import math

import torch

__all__ = ["angular_distance", "relative_update_norm"]


def angular_distance(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Per-token angle between ``a`` and ``b`` along the last dimension, divided by π (values in ``[0, 1]``).

    A zero vector has no direction: its angle to anything is taken as 0.5 (orthogonal) unless both are zero (0);
    a norm at most ``eps`` (a finite number > 0) counts as zero.
    """
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    if a.shape != b.shape:
        raise ValueError(f"angular_distance needs tensors of one shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    a, b = a.double(), b.double()
    na, nb = a.norm(dim=-1, keepdim=True), b.norm(dim=-1, keepdim=True)
    u, v = a / na.clamp_min(eps), b / nb.clamp_min(eps)
    angle = 2 * torch.atan2((u - v).norm(dim=-1), (u + v).norm(dim=-1)) / math.pi
    zero_a, zero_b = na.squeeze(-1) <= eps, nb.squeeze(-1) <= eps
    angle = torch.where(zero_a ^ zero_b, torch.full_like(angle, 0.5), angle)
    return torch.where(zero_a & zero_b, torch.zeros_like(angle), angle)


def relative_update_norm(before: torch.Tensor, after: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``‖after − before‖ / ‖before‖`` per example (norms over every dimension but the first)."""
    if before.shape != after.shape:
        raise ValueError(f"relative_update_norm needs tensors of one shape, got {tuple(before.shape)} and "
                         f"{tuple(after.shape)}")
    before, after = before.double().flatten(1), after.double().flatten(1)
    return (after - before).norm(dim=1) / before.norm(dim=1).clamp_min(eps)
