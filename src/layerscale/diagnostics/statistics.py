"""The per-layer statistics the monitor records, as small pure functions (formulas in each docstring).

Norms are Frobenius norms over the whole tensor (every sample, token and channel of the batch), accumulated in
float32 whatever the activation dtype, so that a ratio of two norms equals the ratio of their RMS values.
Sharded parameters (FSDP2 ``DTensor``) are gathered whole first (a collective: call on every rank).
"""

from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["sum_of_squares", "scale_statistics", "global_norm", "snapshot", "relative_update"]


def _whole(t: torch.Tensor) -> torch.Tensor:
    """The full tensor behind a sharded ``DTensor`` (unchanged for an ordinary tensor)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def sum_of_squares(x: torch.Tensor) -> torch.Tensor:
    """``Σ x²`` over every element, detached (a 0-d tensor on ``x``'s device): in float32 for float32 and lower
    precisions (bf16 / fp16 sums accumulate in float32), in float64 for a float64 tensor (``vector_norm`` refuses to
    narrow a double to float32)."""
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    return torch.linalg.vector_norm(x.detach(), dtype=dtype).square()


@torch.no_grad()
def scale_statistics(gamma: torch.Tensor, kind: str | None) -> torch.Tensor:
    """``[mean|γ|, max|γ|, |γ_1|, …, |γ_H|]`` in float32 (the per-element values only for the per-head form).

    The trailing per-head values let the record show each head of a ``HeadScale``; for per-channel and scalar
    scales only the two summaries are returned (a width-768 vector per record would swamp the log). The mean is
    summed in float64 and then rounded, so it is never above the maximum (a float32 sum of 64 copies of 0.1 gave a
    mean 7e-9 above it).
    """
    magnitude = _whole(gamma.detach()).float().abs().flatten()
    summary = torch.stack((magnitude.double().mean().float(), magnitude.max()))
    return torch.cat((summary, magnitude)) if kind == "head" else summary


@torch.no_grad()
def global_norm(tensors: Iterable[torch.Tensor]) -> torch.Tensor | None:
    """``sqrt(Σ_t ‖t‖²)`` over ``tensors`` in float32 (``None`` when there are none)."""
    norms = [torch.linalg.vector_norm(_whole(t.detach()), dtype=torch.float32) for t in tensors]
    if not norms:
        return None
    return torch.linalg.vector_norm(torch.stack(norms))


@torch.no_grad()
def snapshot(params: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """Detached copies of ``params`` (the weights before an optimizer step)."""
    return [_whole(p.detach()).clone() for p in params]


@torch.no_grad()
def relative_update(before: list[torch.Tensor], after: list[torch.Tensor]) -> torch.Tensor | None:
    """Update-to-weight ratio ``‖W_after − W_before‖ / ‖W_before‖`` over all of a block's weights together.

    ``W`` is the concatenation of the block's parameters; ``None`` when the block has none. (A block whose weights
    are all zero gives NaN or inf; no device synchronisation happens here.)
    """
    if not before:
        return None
    delta = global_norm(_whole(a.detach()) - b for a, b in zip(after, before))
    return delta / global_norm(before)
