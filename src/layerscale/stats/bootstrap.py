"""The nonparametric bootstrap over examples, vectorised: resampling weights, replicated means, percentile intervals.

Efron 1979 ("Bootstrap methods: another look at the jackknife", *Ann. Statist.* 7:1–26); Efron & Tibshirani 1993,
*An Introduction to the Bootstrap*, ch. 6 (the bootstrap estimate of a statistic's distribution) and ch. 13 (the
percentile interval). A bootstrap replicate draws ``N`` of the ``N`` examples with replacement; drawing example
``e`` ``c_{b,e}`` times (``c_b ~ Multinomial(N, 1/N)``) turns every mean over examples into the weighted mean
``θ*_b = Σ_e c_{b,e} v_e / N``. So ``B`` replicates of ``K`` means are one matrix product, ``(B, N) @ (N, K) / N``,
and any statistic that is a function of such means (a difference of means, the first index where a mean curve
crosses a bound) is that function applied to each replicate's row. The two-sided ``level`` percentile interval is
``[θ*_{(α/2)}, θ*_{(1−α/2)}]``, the ``α/2`` and ``1 − α/2`` quantiles of the replicates, ``α = 1 − level``.

Every function takes tensors and returns tensors (float64); randomness comes only from the ``seed`` given.
"""

from __future__ import annotations

import torch

from ..generator_seed import check_generator_seed
from ..machine import machine_memory_bytes
from ..messages import shown_value

__all__ = ["bootstrap_weights", "bootstrap_means", "percentile_interval", "value_shares"]


def _check_count(name: str, value: int, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {shown_value(value)}")


#: bytes per (replicate, example) while the weights are built: the int64 draws, the float64 ones, the float64 counts
_BYTES_PER_WEIGHT = 24


def bootstrap_weights(examples: int, replicates: int = 1000, seed: int = 0) -> torch.Tensor:
    """``(replicates, examples)`` float64 counts ``c_{b,e}``: how often each replicate draws each example (each row
    sums to ``examples``). ``ValueError`` before anything is allocated when building them would need more than this
    machine's memory (24 bytes per replicate and example)."""
    _check_count("examples", examples)
    _check_count("replicates", replicates)
    seed = check_generator_seed(seed)
    memory, need = machine_memory_bytes(), _BYTES_PER_WEIGHT * replicates * examples
    if memory is not None and need > memory:
        raise ValueError(f"replicates x examples = {replicates} x {examples} needs {need} bytes of bootstrap "
                         f"weights; expected at most this machine's {memory} bytes of memory")
    g = torch.Generator().manual_seed(seed)
    draws = torch.randint(0, examples, (replicates, examples), generator=g)
    counts = torch.zeros(replicates, examples, dtype=torch.float64)
    counts.scatter_add_(1, draws, torch.ones(replicates, examples, dtype=torch.float64))
    return counts


def bootstrap_means(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``(B, ...)``: the mean over the examples (first dimension of ``values``, ``(N, ...)``) in each of the ``B``
    replicates of ``weights`` ``(B, N)`` (from :func:`bootstrap_weights`)."""
    values = torch.as_tensor(values, dtype=torch.float64)
    if weights.dim() != 2 or values.dim() < 1 or values.shape[0] != weights.shape[1]:
        raise ValueError(f"bootstrap_means needs values (N, ...) and weights (B, N) over the same N examples, got "
                         f"{tuple(values.shape)} and {tuple(weights.shape)}")
    flat = values.reshape(values.shape[0], -1)
    return (weights @ flat / weights.shape[1]).reshape(weights.shape[0], *values.shape[1:])


def percentile_interval(replicates: torch.Tensor, level: float = 0.95,
                        discrete: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(low, high)``, each of the shape of one replicate: the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles
    over the first dimension (Efron & Tibshirani 1993, ch. 13; linear interpolation between order statistics,
    or with ``discrete`` the order statistics at or outside them, so that an integer statistic such as a depth gets
    integer bounds). A quantity that is NaN in any replicate gets a NaN interval."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise ValueError(f"interval level must be a number in (0, 1), got {level!r}")
    replicates = torch.as_tensor(replicates, dtype=torch.float64)
    if replicates.dim() < 1 or replicates.shape[0] < 2:
        raise ValueError(f"percentile_interval needs at least 2 replicates, got shape {tuple(replicates.shape)}")
    alpha = (1.0 - level) / 2
    q = torch.tensor([alpha, 1.0 - alpha], dtype=torch.float64)
    if discrete:
        bounds = torch.stack([torch.quantile(replicates, q[0], dim=0, interpolation="lower"),
                              torch.quantile(replicates, q[1], dim=0, interpolation="higher")])
    else:
        bounds = torch.quantile(replicates, q, dim=0)
    nan = torch.isnan(replicates).any(dim=0)
    bounds = torch.where(nan, torch.full_like(bounds, float("nan")), bounds)
    return bounds[0], bounds[1]


def value_shares(replicates: torch.Tensor) -> dict[int, float]:
    """For an integer-valued statistic (a depth): ``{value: share of the replicates}``, values ascending."""
    replicates = torch.as_tensor(replicates).reshape(-1)
    if replicates.numel() == 0:
        raise ValueError("value_shares needs at least one replicate")
    if replicates.is_floating_point() or replicates.is_complex():
        bad = ~torch.isfinite(replicates) | (replicates.abs() >= 2.0**63)  # NaN, inf, or no int64 once rounded
        if bad.any():
            raise ValueError(f"value_shares replicates: {int(bad.sum())} of {replicates.numel()} are non-finite or "
                             f"too large (first {replicates[bad][0].item()}); expected finite integer-valued numbers")
    values, counts = torch.unique(replicates.round().long(), return_counts=True)
    total = float(counts.sum())
    return {int(v): float(c) / total for v, c in zip(values, counts)}
