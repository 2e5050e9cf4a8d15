"""The contiguous n-block removal curve: the loss after removing the best span of ``n`` blocks, ``n = 1 … L``.

Removing blocks ``s … s + n − 1`` (0-based) sets ``x^(s+n) = x^(s)`` and runs the blocks after the span
(:meth:`~layerscale.analysis.removal.streams.BlockStack.run_removed` on the cached streams: ``L − s − n`` block
evaluations). Which span of each length:

* ``"angular"`` (Gromov et al. 2024, arXiv 2403.17887): ``s*(n) = argmin_s d(x^(s), x^(s+n))`` on the token
  the head reads, one span per ``n`` chosen before any removal is evaluated; at most ``L²/2`` block evaluations in
  all, usually far fewer (the chosen spans tend to end near the top, and a span ending at the top costs none);
* ``"exhaustive"``: every span (``L(L + 1)/2`` of them, about ``L³/6`` block evaluations), the curve taking the
  lowest mean loss per ``n`` — the best any contiguous removal can do, affordable for small ``L``.

Spans already measured elsewhere are reused, not run again: a single block (``n = 1``) is its ablation, and a span
ending at the top (``s + n = L``) is the early exit after ``s`` blocks.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..eval_data.evaluation import logits_of, per_example_loss
from .ablation import LossTotals
from .streams import BlockStack, CapturedBatch

__all__ = ["SPAN_SELECTIONS", "best_span", "candidate_spans", "spans_to_run", "remove_spans", "span_losses",
           "best_per_length"]

SPAN_SELECTIONS = ("angular", "exhaustive")


def best_span(distances: torch.Tensor | list, n: int) -> tuple[int, float]:
    """Gromov et al.'s choice from a mean distance matrix ``distances[i][j] = d(x^(i), x^(j))`` (``(L+1, L+1)``):
    ``(ℓ*, d(x^(ℓ*), x^(ℓ*+n)))`` with ``ℓ* = argmin_ℓ d(x^(ℓ), x^(ℓ+n))``, first on ties."""
    matrix = torch.as_tensor(distances, dtype=torch.float64)
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"best_span needs an (L+1, L+1) distance matrix with L >= 1, got {tuple(matrix.shape)}")
    depth = matrix.shape[0] - 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= depth:
        raise ValueError(f"span length n must be an int in [1, {depth}] (the number of blocks), got {n!r}")
    starts = torch.arange(depth - n + 1)
    candidates = matrix[starts, starts + n]
    if torch.isnan(candidates).any():
        raise ValueError("best_span: the distance matrix holds NaN (non-finite streams)")
    start = int(torch.argmin(candidates))  # argmin returns the first minimum
    return start, float(candidates[start])


def candidate_spans(mean_distance: torch.Tensor, selection: str) -> list[tuple[int, int]]:
    """``(start, n)`` pairs (0-based start): Gromov's best span per ``n`` (``"angular"``) or every span."""
    depth = mean_distance.shape[0] - 1
    if selection == "angular":
        return [(best_span(mean_distance, n)[0], n) for n in range(1, depth + 1)]
    if selection == "exhaustive":
        return [(s, n) for n in range(1, depth + 1) for s in range(depth - n + 1)]
    raise ValueError(f"spans must be one of {SPAN_SELECTIONS}, got {selection!r}")


def spans_to_run(spans: list[tuple[int, int]], depth: int) -> list[tuple[int, int]]:
    """The spans that need their own pass: neither one block nor ending at the top."""
    return sorted({(s, n) for s, n in spans if n > 1 and s + n < depth})


def remove_spans(stack: BlockStack, inputs: torch.Tensor, targets: torch.Tensor, captured: CapturedBatch,
                 spans: list[tuple[int, int]], totals: LossTotals, step: Callable[[], None] = lambda: None) -> None:
    """Add the batch's per-example loss and accuracy with span ``spans[i]`` removed to ``totals[i]``."""
    for index, (start, n) in enumerate(spans):
        logits = logits_of(stack.run_removed(inputs, captured, start, start + n), stack.model_name)
        totals.add(index, *per_example_loss(logits, targets))
        step()


def span_losses(spans: list[tuple[int, int]], depth: int, ran: list[tuple[int, int]],
                ran_values: torch.Tensor, ablation_values: torch.Tensor,
                exit_values: torch.Tensor) -> torch.Tensor:
    """``(N, len(spans))`` per-example values (loss or accuracy) of each span's removal, gathered from the spans
    run (``ran_values[:, i]`` for ``ran[i]``), the ablations (``(N, L)``) and the early exits (``(N, L + 1)``)."""
    column = {span: i for i, span in enumerate(ran)}
    out = []
    for start, n in spans:
        if n == 1:
            out.append(ablation_values[:, start])
        elif start + n == depth:
            out.append(exit_values[:, start])
        else:
            out.append(ran_values[:, column[(start, n)]])
    return torch.stack(out, dim=1)


def best_per_length(mean_delta: torch.Tensor, spans: list[tuple[int, int]], depth: int) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """``(curve, choice)``: for each ``n = 1 … L`` the lowest of ``mean_delta[..., i]`` over the spans of length
    ``n`` (``(..., L)``), and the index into ``spans`` of that span (first on ties)."""
    curves, choices = [], []
    lengths = torch.tensor([n for _, n in spans])
    for n in range(1, depth + 1):
        columns = torch.nonzero(lengths == n).flatten()
        values = mean_delta[..., columns]
        # NaN never wins: a span whose loss is undefined is not the best
        picked = torch.nan_to_num(values, nan=float("inf")).argmin(dim=-1)
        curves.append(values.gather(-1, picked.unsqueeze(-1)).squeeze(-1))
        choices.append(columns[picked])
    return torch.stack(curves, dim=-1), torch.stack(choices, dim=-1)
