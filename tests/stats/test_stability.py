"""Stability measures against hand computations (layerscale.stats.stability)."""

import math
import random

import pytest

from layerscale.stats.stability import loss_spikes, pitman_morgan, rate_window, seed_spread, spread_ratio


def test_rate_window_counts_the_rates_within_tolerance_of_the_best():
    means = {3e-4: 80.0, 1e-3: 84.6, 3e-3: 85.0, 9e-3: 70.0}
    window = rate_window(means, tolerance=0.5)
    assert window.rates == (1e-3, 3e-3) and window.best == 3e-3 and window.ratio == pytest.approx(3.0)
    assert rate_window(means, tolerance=0.0).ratio == 1.0
    loss = rate_window({1e-3: 1.20, 3e-3: 1.25, 1e-2: float("nan")}, tolerance=0.1, higher_is_better=False)
    assert loss.rates == (1e-3, 3e-3) and loss.best == 1e-3
    with pytest.raises(ValueError, match="tolerance"):
        rate_window(means, tolerance=-1)


def test_seed_spread_is_the_sample_standard_deviation():
    assert seed_spread([1.0, 2.0, 3.0, 4.0]) == pytest.approx(math.sqrt(5 / 3))
    with pytest.raises(ValueError):
        seed_spread([1.0])


def test_spread_ratio_of_an_arm_twice_as_spread_is_two_in_every_draw():
    reference = {s: float(v) for s, v in enumerate([1, 4, 2, 8, 5, 7, 3, 6, 9, 0])}
    doubled = {s: 10.0 + 2.0 * v for s, v in reference.items()}
    ratio = spread_ratio(doubled, reference, draws=500)
    assert ratio.ratio == pytest.approx(2.0) and ratio.low == pytest.approx(2.0) and ratio.high == pytest.approx(2.0)
    same = spread_ratio(reference, reference, draws=500)
    assert same.low == pytest.approx(1.0) and same.high == pytest.approx(1.0)
    other = {s: v * ((-1) ** s) for s, v in reference.items()}
    interval = spread_ratio(other, reference, draws=2000, seed=3)
    assert interval.low < interval.ratio < interval.high and interval.draws <= 2000
    assert spread_ratio(other, reference, draws=2000, seed=3) == interval  # the seed fixes the draws
    with pytest.raises(ValueError, match="at least 3 seeds"):
        spread_ratio({0: 1.0, 1: 2.0}, {0: 1.0, 1: 3.0})


def test_pitman_morgan_equals_the_t_test_of_the_sum_difference_correlation():
    from scipy.stats import t as student_t

    x = {0: 85.1, 1: 86.0, 2: 84.2, 3: 85.7, 4: 83.9, 5: 86.4}
    y = {0: 84.0, 1: 84.9, 2: 84.5, 3: 84.8, 4: 84.1, 5: 85.0}
    sums = [x[s] + y[s] for s in x]
    diffs = [x[s] - y[s] for s in x]
    n = len(sums)
    ms, md = sum(sums) / n, sum(diffs) / n
    r = (sum((a - ms) * (b - md) for a, b in zip(sums, diffs))
         / math.sqrt(sum((a - ms) ** 2 for a in sums) * sum((b - md) ** 2 for b in diffs)))
    t = r * math.sqrt((n - 2) / (1 - r * r))
    assert pitman_morgan(x, y) == pytest.approx(2 * student_t.sf(abs(t), n - 2), rel=1e-10)
    assert pitman_morgan(x, x) == 1.0  # identical arms: no difference, equal spread


def test_loss_spikes_follow_lightnings_rule():
    steady = [2.0, 1.8, 1.7, 1.6, 1.5]
    assert loss_spikes(steady) == []
    # 6.0 rises from 1.5 and is 4.28 from the running mean 1.72, at least 2 × 1.72 = 3.44: a spike, left out of it
    assert loss_spikes(steady + [6.0, 1.4]) == [5]
    # 4.0 is 2.28 from the mean 1.72: under 2 × 1.72 = 3.44, not a spike
    assert loss_spikes(steady + [4.0]) == []
    assert loss_spikes(steady + [float("nan"), 1.4]) == [5]
    assert loss_spikes([100.0, 1.0]) == []  # the first value (warmup 1) is never a spike
    # the running mean covers the last `window` non-spike values only
    assert loss_spikes([10.0, 1.0, 1.0, 3.5], window=2) == [3]
    assert loss_spikes([10.0, 1.0, 1.0, 3.5], window=3) == []
    # spikes stay out of the mean, so a lasting jump counts at every record until the mean could follow it
    assert loss_spikes([1.0] * 3 + [10.0] * 3) == [3, 4, 5]


def test_spread_interval_is_the_chi_square_interval_of_the_standard_deviation():
    from layerscale.stats.stability import spread_interval

    # published factors of the 95 % interval of σ for n = 3 and n = 5 (Boost.Math, "Confidence intervals on the
    # standard deviation": 0.5207–6.2847 and 0.5991–2.8736 times s)
    values = [1.0, 2.0, 3.0]  # s = 1
    low, high = spread_interval(values)
    assert (round(low, 4), round(high, 4)) == (0.5207, 6.2847)
    five = [0.0, 1.0, 2.0, 3.0, 4.0]
    s = seed_spread(five)
    low, high = spread_interval(five)
    assert (round(low / s, 4), round(high / s, 4)) == (0.5991, 2.8736)
    with pytest.raises(ValueError):
        spread_interval([1.0])


def test_a_draw_of_equal_reference_values_is_left_out_not_a_ratio_of_rounding():
    # 85.6 three times has a numpy std of about 1e-14, not 0: such draws would put ratios of ~1e13 in the interval
    # (DepthBench's Pre-LN at 16 blocks, test accuracy of its three seeds, against LayerScale's)
    reference = {0: 85.63, 1: 85.6, 2: 85.6}
    values = {0: 86.11999999999999, 1: 86.49, 2: 86.22}
    ratio = spread_ratio(values, reference, draws=2000, seed=0)
    assert ratio.high < 1e3 and ratio.draws < 2000


@pytest.mark.parametrize("seed", range(20))
def test_pitman_morgan_equals_scipys_pearsonr_p_value(seed):
    """The same p-value as ``scipy.stats.pearsonr`` on the sums and differences (to rounding), from exactly
    rounded sums, so that it does not depend on the CPU's vector width."""
    from scipy.stats import pearsonr

    rng = random.Random(seed)
    n = rng.choice([3, 4, 5, 10])
    x = {s: rng.gauss(85, 1) for s in range(n)}
    y = {s: rng.gauss(85, 2) for s in range(n)}
    expected = pearsonr([x[s] + y[s] for s in range(n)], [x[s] - y[s] for s in range(n)]).pvalue
    assert pitman_morgan(x, y) == pytest.approx(expected, rel=1e-9, abs=1e-15)
