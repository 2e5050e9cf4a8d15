"""Training stability as numbers: learning-rate window, seed spread and its ratio, equal-spread test, loss spikes.

The product's claim is stability, so a study measures it rather than inferring it from final accuracy
(docs/study.md, "Stability"). Pure functions over numbers (no I/O); randomness only from the ``seed`` given.

- **Learning-rate window** (:func:`rate_window`): the grid rates whose mean validation score is within
  ``tolerance`` of the cell's best mean, and the ratio of the largest such rate to the smallest (1 when only the
  best rate qualifies). A wide window is a method that forgives a mis-set learning rate.
- **Seed spread** (:func:`seed_spread`): the sample standard deviation (``n − 1``) of a cell's final metric over
  its seeds; :func:`spread_ratio` is a method's spread over the reference's, with a 95 % percentile bootstrap
  interval over seeds (Efron & Tibshirani 1993, ch. 13) that resamples seed indices jointly for both arms, because
  the two arms are paired by seed. :func:`spread_interval` is the spread's own interval from the chi-square pivot
  ``(n − 1) s² / σ² ~ χ²(n − 1)`` of normal data (Casella & Berger 2002, *Statistical Inference*, 2nd ed.,
  §9.2): ``[s √((n − 1)/χ²_{1−α/2}), s √((n − 1)/χ²_{α/2})]``, ``scipy.stats.chi2``.
- **Equal spread of paired samples** (:func:`pitman_morgan`): Pitman (1939, *Biometrika* 31:9–12) and Morgan (1939,
  *Biometrika* 31:13–19): for paired ``x, y``, ``Var x = Var y`` exactly when ``x + y`` and ``x − y`` are
  uncorrelated, so the test of equal variances is the test of zero Pearson correlation between sums and
  differences (``t = r √((n − 2)/(1 − r²))`` on ``n − 2`` degrees of freedom). The two-sided p-value is
  ``scipy.stats.pearsonr``'s, ``2 I_{(1 − |r|)/2}(n/2 − 1, n/2 − 1)`` (the regularised incomplete beta function,
  ``scipy.special.betainc``), with ``r`` summed exactly rounded (``math.fsum``) so that a table rebuilds to the same
  bytes on any CPU (``pearsonr``'s vector sums and norms round differently with the CPU's vector width).
- **Loss spikes** (:func:`loss_spikes`): the rule of Lightning Fabric's ``SpikeDetection`` callback
  (``lightning.fabric.utilities.spike``) with its defaults ``mode="min"``, ``window=10``, ``warmup=1``,
  ``rtol=2.0``, ``atol=None``, ``finite_only=True``: a value is a spike when it is not finite, or when it rose from
  the previous non-spike value and differs from the running mean of the last ``window`` non-spike values by at
  least ``rtol`` × that mean (and by at least ``atol``, when given); the first ``warmup`` values are never spikes;
  spikes do not enter the running mean. Lightning stops training at the first spike; a study counts them instead.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .intervals import ROUNDING

__all__ = ["RateWindow", "rate_window", "seed_spread", "spread_interval", "SpreadRatio", "spread_ratio",
           "pitman_morgan", "loss_spikes"]


@dataclass(frozen=True)
class RateWindow:
    """The rates within the tolerance of the best (sorted), the best rate, and largest / smallest of them."""

    rates: tuple[float, ...]
    best: float
    ratio: float


def rate_window(means: Mapping[float, float], tolerance: float, higher_is_better: bool = True) -> RateWindow:
    """The learning-rate window of one cell from its per-rate mean validation scores (non-finite means never
    qualify). ``ValueError`` when no mean is finite or ``tolerance`` is negative."""
    if not math.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance}")
    finite = {lr: m for lr, m in means.items() if math.isfinite(m)}
    if not finite:
        raise ValueError("no rate has a finite mean score")
    sign = 1.0 if higher_is_better else -1.0
    best = max(finite, key=lambda lr: (sign * finite[lr], -lr))
    rates = tuple(sorted(lr for lr, m in finite.items() if sign * (finite[best] - m) <= tolerance))
    return RateWindow(rates, best, rates[-1] / rates[0])


def seed_spread(values: Sequence[float]) -> float:
    """The sample standard deviation (``n − 1``) of ``values``; ``ValueError`` for fewer than 2 values."""
    if len(values) < 2:
        raise ValueError(f"a spread needs at least 2 values, got {len(values)}")
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def spread_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The two-sided ``level`` interval of the standard deviation of normal data from the sample ``values``: the
    chi-square pivot of the module docstring. ``ValueError`` for fewer than 2 values."""
    from scipy.stats import chi2

    s, df = seed_spread(values), len(values) - 1
    alpha = 1.0 - level
    return (s * math.sqrt(df / float(chi2.ppf(1.0 - alpha / 2.0, df))),
            s * math.sqrt(df / float(chi2.ppf(alpha / 2.0, df))))


@dataclass(frozen=True)
class SpreadRatio:
    """A method's seed spread over the reference's, its percentile bootstrap interval, and the draws used."""

    ratio: float
    low: float
    high: float
    draws: int


def spread_ratio(values: Mapping[int, float], reference: Mapping[int, float], draws: int = 2000, seed: int = 0,
                 level: float = 0.95) -> SpreadRatio:
    """``seed_spread(values) / seed_spread(reference)`` over the seeds both have, with the percentile bootstrap
    interval of the ratio: each draw resamples the shared seeds with replacement, the same seeds for both arms.
    Draws whose reference spread is 0 (at most ``ROUNDING``, 1e-9, of the values: equal values up to rounding) are
    left out (``draws`` says how many counted). ``ValueError`` with fewer
    than 3 shared seeds or a reference without spread."""
    import numpy as np

    seeds = sorted(set(values) & set(reference))
    if len(seeds) < 3:
        raise ValueError(f"a spread ratio needs at least 3 seeds shared by both arms, got {len(seeds)}")
    x = np.array([values[s] for s in seeds], dtype=np.float64)
    y = np.array([reference[s] for s in seeds], dtype=np.float64)
    if seed_spread(list(y)) == 0:
        raise ValueError("the reference has no spread over its seeds: no ratio")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(seeds), size=(draws, len(seeds)))
    sx, sy = x[index].std(axis=1, ddof=1), y[index].std(axis=1, ddof=1)
    # a draw of equal reference values has no spread, but numpy's two-pass std leaves rounding of about 1e-14 there
    # (85.63 three times), which would put ratios of 1e13 into the interval: below 1e-9 of the values, none
    keep = sy > ROUNDING * max(1.0, float(np.abs(y).max()))
    ratios = sx[keep] / sy[keep]
    alpha = 1.0 - level
    low, high = np.quantile(ratios, [alpha / 2.0, 1.0 - alpha / 2.0])
    return SpreadRatio(seed_spread(list(x)) / seed_spread(list(y)), float(low), float(high), int(keep.sum()))


def pitman_morgan(values: Mapping[int, float], reference: Mapping[int, float]) -> float:
    """The two-sided p-value of the Pitman–Morgan test of equal variances for the two arms paired by seed (see the
    module docstring). ``ValueError`` with fewer than 3 shared seeds."""
    from scipy.special import betainc

    seeds = sorted(set(values) & set(reference))
    if len(seeds) < 3:
        raise ValueError(f"the Pitman-Morgan test needs at least 3 paired seeds, got {len(seeds)}")
    sums = [values[s] + reference[s] for s in seeds]
    diffs = [values[s] - reference[s] for s in seeds]
    if seed_spread(sums) == 0 or seed_spread(diffs) == 0:  # y = x + c or y = c − x: the variances are equal
        return 1.0
    n = len(seeds)
    mean_sum, mean_diff = math.fsum(sums) / n, math.fsum(diffs) / n
    centred_sums, centred_diffs = [a - mean_sum for a in sums], [b - mean_diff for b in diffs]
    r = math.fsum(a * b for a, b in zip(centred_sums, centred_diffs)) / math.sqrt(
        math.fsum(a * a for a in centred_sums) * math.fsum(b * b for b in centred_diffs))
    r = max(-1.0, min(1.0, r))
    half = n / 2 - 1
    return float(min(1.0, 2 * betainc(half, half, (1 - abs(r)) / 2)))


def loss_spikes(losses: Sequence[float], window: int = 10, rtol: float | None = 2.0, atol: float | None = None,
                warmup: int = 1) -> list[int]:
    """The indices of the spikes in the loss series ``losses`` under Lightning's rule (module docstring)."""
    if window < 1 or warmup < 0 or (rtol is None and atol is None):
        raise ValueError("loss_spikes needs window >= 1, warmup >= 0 and at least one of rtol, atol")
    recent: deque[float] = deque(maxlen=window)
    last = 0.0
    spikes = []
    for index, loss in enumerate(losses):
        if index >= warmup and _is_spike(loss, last, recent, rtol, atol):
            spikes.append(index)
            continue
        if math.isfinite(loss):
            recent.append(loss)
            last = loss
    return spikes


def _is_spike(loss: float, last: float, recent: deque, rtol: float | None, atol: float | None) -> bool:
    if not math.isfinite(loss):
        return True
    if loss - last <= 0.0 or not recent:  # no rise (mode "min"), or nothing to compare with
        return False
    running = math.fsum(recent) / len(recent)
    return ((atol is None or abs(loss - running) >= abs(atol))
            and (rtol is None or abs(loss - running) >= abs(rtol * running)))
