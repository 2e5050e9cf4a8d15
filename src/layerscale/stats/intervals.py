"""Confidence intervals over seeds: Student's t, for a cell's mean and for paired differences between methods.

For ``n`` values with mean ``x̄`` and sample standard deviation ``s`` (divisor ``n − 1``), the two-sided
``level`` interval of the mean is ``x̄ ± t_{(1+level)/2, n−1} · s / √n`` (Student 1908; e.g. Wasserman, *All of
Statistics*, §10). A paired difference (method − reference, run by run with the same seed, hence the same data
order and split) is the same interval over the per-seed differences. With one value there is no interval
(``None``): the tables then print "n = 1" rather than a made-up "± 0". With fewer than
:data:`MIN_VALUES_FOR_INTERVAL` (3) values no t-interval is formed at all (``low = high = None``): with 2 values
``t_{0.975, 1} = 12.7`` and the interval mostly measures the multiplier; the tables print the values themselves.

A metric with a range (accuracy in [0, 100]) gets its interval truncated to the range (:func:`within_range`):
truncation cannot exclude the true mean, which lies in the range, so the coverage is the t-interval's own; the
truncated end is marked (``Interval.truncated``) and the tables print it with a ``†``. (A logit-scale interval
would also stay inside the range, but it needs a continuity correction when a seed scores 0 % or 100 % and moves
the centre away from the mean the tables compare.)

Every interval carries its two-sided t-test p-value of "the mean is 0" (:func:`p_value`): ``t = x̄ / SE`` with the
same degrees of freedom as the interval, ``p = 2 (1 − F_ν(|t|))``; ``p < 1 − level`` exactly when the interval
excludes 0.

The t distribution's quantile and upper tail are SciPy's (``scipy.stats.t.ppf`` and ``.sf``; the ``stats``
extra). Until 2026-12-06 they were computed here by bisection on a continued-fraction incomplete beta, whose upper
tail ``1 − F`` lost relative precision far in the tail (up to 4e-5 relative at t = 10); the committed studies'
tables were rebuilt with SciPy's values that day: their CSV values moved by at most 5.5e-11 relative, and no
printed number or verdict changed (docs/study.md, "Reading the numbers").

Values equal up to floating-point rounding have no spread: accuracies are multiples of 0.01 %, and a per-seed
difference of two of them that is the same on every seed (1.31 three times) comes out of the subtraction differing
in the 14th digit. A standard deviation at most :data:`ROUNDING` (1e-9) times the values' magnitude (at least 1) is
that noise and is taken as 0 (:func:`spread`): the row says "no spread" and has no p-value, instead of a t of 1e14.

Two cells that share no pairing (the same method at two depths: different models, so a seed does not pair them)
are compared by Welch's interval of the difference of their means, ``x̄₁ − x̄₂ ± t_{(1+level)/2, ν} · SE`` with
``SE² = s₁²/n₁ + s₂²/n₂`` and the Welch–Satterthwaite degrees of freedom
``ν = SE⁴ / ((s₁²/n₁)²/(n₁−1) + (s₂²/n₂)²/(n₂−1))`` (Welch 1947, *Biometrika* 34:28–35; Satterthwaite
1946, *Biometrics Bulletin* 2:110–114).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

__all__ = ["Interval", "MIN_VALUES_FOR_INTERVAL", "ROUNDING", "mean_interval", "paired_interval", "p_value",
           "spread", "t_quantile", "t_sf", "welch_interval", "within_range"]

#: fewer values than this get no t-interval (their values are printed instead)
MIN_VALUES_FOR_INTERVAL = 3
#: a spread at most this share of the values' magnitude (at least 1) is floating-point rounding, i.e. none
ROUNDING = 1e-9


def spread(values: Sequence[float]) -> float:
    """The sample standard deviation of ``values`` (two or more; divisor ``n − 1``), ``0.0`` when it is at most
    :data:`ROUNDING` times the largest ``|value|`` (at least 1): values equal up to rounding (module docstring)."""
    std = statistics.stdev(values)
    return 0.0 if std <= ROUNDING * max(1.0, max(abs(v) for v in values)) else std


def t_sf(t: float, df: float) -> float:
    """The upper tail ``P(T > t)`` of Student's t with ``df`` degrees of freedom (``scipy.stats.t.sf``)."""
    from scipy.stats import t as student_t

    return float(student_t.sf(t, df))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``0.5 < p < 1``, ``df ≥ 1``, not
    necessarily an integer; ``scipy.stats.t.ppf``)."""
    from scipy.stats import t as student_t

    if not 0.5 < p < 1.0:
        raise ValueError(f"quantile level must be in (0.5, 1), got {p}")
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return float(student_t.ppf(p, df))


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values with its two-sided ``level`` t-interval ``[low, high]`` (``None`` with fewer than
    :data:`MIN_VALUES_FOR_INTERVAL` values). ``std``: the values' standard deviation (for a Welch difference: the
    standard error of the difference); ``df``: the t distribution's degrees of freedom (``n − 1`` when ``None``);
    ``values``: the values themselves, in seed order where they come from seeds; ``truncated``: which end was cut
    to the metric's range (``"low"``, ``"high"``, ``"both"`` or ``""``)."""

    mean: float
    low: float | None
    high: float | None
    n: int
    std: float | None
    level: float = 0.95
    df: float | None = None
    values: tuple[float, ...] = ()
    truncated: str = ""

    @property
    def standard_error(self) -> float | None:
        """``s / √n`` of a mean (the stored ``std`` itself for a Welch difference, whose ``df`` is set)."""
        if self.std is None:
            return None
        return self.std if self.df is not None else self.std / math.sqrt(self.n)

    @property
    def half_width(self) -> float | None:
        return None if self.low is None else (self.high - self.low) / 2

    def excludes(self, value: float = 0.0) -> bool:
        """Whether the interval lies entirely on one side of ``value`` (a difference that is not noise)."""
        return self.low is not None and (self.low > value or self.high < value)


def mean_interval(values: Sequence[float], level: float = 0.95) -> Interval | None:
    """The mean of ``values`` and its t-interval; ``None`` for no values, no interval (``low = high = None``)
    for one value."""
    values = tuple(float(v) for v in values)
    if not values:
        return None
    mean = statistics.fmean(values)
    if len(values) < MIN_VALUES_FOR_INTERVAL:
        std = spread(values) if len(values) > 1 else None
        return Interval(mean, None, None, len(values), std, level, values=values)
    std = spread(values)
    half = t_quantile((1.0 + level) / 2.0, len(values) - 1) * std / math.sqrt(len(values))
    return Interval(mean, mean - half, mean + half, len(values), std, level, values=values)


def paired_interval(values: dict[int, float], reference: dict[int, float], level: float = 0.95) -> Interval | None:
    """``values − reference`` seed by seed (only seeds present in both) and its t-interval."""
    seeds = sorted(set(values) & set(reference))
    return mean_interval([values[s] - reference[s] for s in seeds], level)


def welch_interval(first: Interval | None, second: Interval | None, level: float = 0.95) -> Interval | None:
    """``first − second`` for two independent cells, with Welch's t-interval (see the module docstring).

    Takes the cells' own intervals (their means, standard deviations and counts). ``None`` when either cell is
    missing; no interval (``low = high = None``) when either has a single value. The result's ``n`` is the smaller
    of the two counts and its ``std`` the standard error of the difference, ``0`` when neither cell varies (no
    interval can then be estimated: ``verdict`` says "no spread").
    """
    if first is None or second is None:
        return None
    mean = first.mean - second.mean
    n = min(first.n, second.n)
    if first.low is None or second.low is None:  # either cell too small for an interval of its own
        return Interval(mean, None, None, n, None, level)
    var1, var2 = first.std ** 2 / first.n, second.std ** 2 / second.n
    se = math.sqrt(var1 + var2)
    if se == 0.0:
        return Interval(mean, mean, mean, n, 0.0, level, df=float(first.n + second.n - 2))
    df = max((var1 + var2) ** 2 / (var1 ** 2 / (first.n - 1) + var2 ** 2 / (second.n - 1)), 1.0)
    half = t_quantile((1.0 + level) / 2.0, df) * se
    return Interval(mean, mean - half, mean + half, n, se, level, df=df)


def p_value(interval: Interval | None) -> float | None:
    """Two-sided p-value of the t-test that the interval's mean is 0: ``2 · P(T_ν > |x̄| / SE)`` with the
    interval's own degrees of freedom. ``None`` without an interval or without spread (zero standard error)."""
    if interval is None or interval.low is None or not interval.std:
        return None
    df = interval.df if interval.df is not None else interval.n - 1
    return min(1.0, 2.0 * t_sf(abs(interval.mean) / interval.standard_error, df))


def within_range(interval: Interval | None, low: float, high: float) -> Interval | None:
    """``interval`` with its ends truncated to the metric's range ``[low, high]``, marked in ``truncated`` (see
    the module docstring: the coverage is unchanged because the true mean lies in the range)."""
    if interval is None or interval.low is None:
        return interval
    cut_low, cut_high = interval.low < low, interval.high > high
    if not (cut_low or cut_high):
        return interval
    mark = "both" if cut_low and cut_high else ("low" if cut_low else "high")
    return replace(interval, low=max(interval.low, low), high=min(interval.high, high), truncated=mark)
