import math
import statistics

import pytest

from layerscale.stats.intervals import (mean_interval, p_value, paired_interval, t_quantile, t_sf, welch_interval,
                                       within_range)
from layerscale.study.report.results import verdict

# Student's t 0.975 quantiles from printed tables (e.g. NIST/SEMATECH e-Handbook, Table 1.3.6.7.2).
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 10: 2.228, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize("df, expected", sorted(T_975.items()))
def test_t_quantiles_match_the_printed_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_t_quantiles_agree_with_scipy_where_it_is_installed():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 7, 50):
        for p in (0.9, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8)


def test_the_interval_is_the_hand_computed_one():
    values = [84.0, 86.0, 85.0]
    # mean 85, s = 1, n = 3: half width = t(0.975, 2) * 1 / sqrt(3) = 4.3027 / 1.7321 = 2.4841
    interval = mean_interval(values)
    assert interval.mean == 85.0 and interval.n == 3 and interval.std == pytest.approx(1.0)
    assert interval.low == pytest.approx(85.0 - 2.48414, abs=1e-4)
    assert interval.high == pytest.approx(85.0 + 2.48414, abs=1e-4)
    assert interval.excludes(80.0) and not interval.excludes(86.0)


def test_one_value_has_no_interval_and_none_has_no_mean():
    one = mean_interval([70.0])
    assert one.mean == 70.0 and one.low is None and one.high is None and not one.excludes(0.0)
    assert mean_interval([]) is None


def test_paired_differences_use_only_the_seeds_both_have():
    method = {0: 90.0, 1: 91.0, 2: 93.0, 4: 92.0}
    reference = {0: 88.0, 1: 90.0, 3: 50.0, 4: 92.5}
    diff = paired_interval(method, reference)
    assert diff.n == 3 and diff.mean == pytest.approx(2.5 / 3) and diff.values == (2.0, 1.0, -0.5)
    half = t_quantile(0.975, 2) * statistics.stdev([2.0, 1.0, -0.5]) / math.sqrt(3)
    assert diff.low == pytest.approx(2.5 / 3 - half)


def test_fewer_than_three_values_get_no_interval_but_keep_their_values():
    two = mean_interval([97.1, 98.5])
    assert two.low is None and two.high is None and two.values == (97.1, 98.5) and two.n == 2
    assert verdict(two, True) == "n < 3" and p_value(two) is None


def test_welch_interval_matches_the_reference_values():
    # SciPy's ttest_ind(a, b, equal_var=False).confidence_interval(0.95) on these values: (0.341322, 4.208678),
    # Welch-Satterthwaite df 4.3789.
    a, b = [85.1, 84.2, 86.3, 85.9], [83.0, 84.1, 82.2]
    diff = welch_interval(mean_interval(a), mean_interval(b))
    assert diff.mean == pytest.approx(statistics.fmean(a) - statistics.fmean(b), abs=1e-12)
    assert diff.low == pytest.approx(0.34132220055711926, abs=1e-8)
    assert diff.high == pytest.approx(4.208677799442864, abs=1e-8)
    assert verdict(diff, higher_is_better=True) == "better"
    swapped = welch_interval(mean_interval(b), mean_interval(a))
    assert (swapped.low, swapped.high) == pytest.approx((-diff.high, -diff.low), abs=1e-12)
    assert verdict(swapped, higher_is_better=True) == "worse"


def test_welch_degrees_of_freedom_lie_between_the_smaller_cell_and_the_pooled_count():
    a, b = mean_interval([1.0, 2.0, 3.0]), mean_interval([1.5, 2.5, 2.0, 1.0])
    diff = welch_interval(a, b)
    se = math.sqrt(a.std ** 2 / a.n + b.std ** 2 / b.n)
    assert diff.std == pytest.approx(se)
    # Welch's df lies in [min(n) - 1, n1 + n2 - 2], so its quantile lies between those two t quantiles.
    assert t_quantile(0.975, a.n + b.n - 2) * se <= diff.half_width <= t_quantile(0.975, min(a.n, b.n) - 1) * se
    assert verdict(diff, higher_is_better=True) == "within noise"
    assert welch_interval(a, mean_interval([2.0])).low is None
    assert welch_interval(a, None) is None
    flat = welch_interval(mean_interval([2.0, 2.0, 2.0]), mean_interval([1.0, 1.0, 1.0]))
    assert flat.mean == 1.0 and verdict(flat, higher_is_better=True) == "no spread"


def test_p_value_is_the_two_sided_t_test_of_the_interval():
    # by hand: t = mean / (s / sqrt n), df 3
    values = [1.2, 0.4, 0.9, 1.5]
    interval = mean_interval(values)
    t = statistics.fmean(values) / (statistics.stdev(values) / math.sqrt(4))
    assert p_value(interval) == pytest.approx(2 * t_sf(t, 3), rel=1e-12)
    assert p_value(interval) == pytest.approx(0.0236632993749, abs=1e-9)  # SciPy ttest_1samp
    # p < 0.05 exactly when the 95 % interval excludes 0
    for values in ([0.1, -0.2, 0.3], [1.0, 1.1, 0.9], [0.5, 0.1, 0.3, -0.05]):
        interval = mean_interval(values)
        assert (p_value(interval) < 0.05) == interval.excludes(0.0)


def test_welch_p_value_uses_the_welch_degrees_of_freedom():
    a, b = [85.1, 84.2, 86.3, 85.9], [83.0, 84.1, 82.2]
    diff = welch_interval(mean_interval(a), mean_interval(b))
    assert diff.df == pytest.approx(4.3789, abs=1e-4)
    assert p_value(diff) == pytest.approx(2 * t_sf(diff.mean / diff.std, diff.df), rel=1e-12)
    assert p_value(diff) == pytest.approx(0.0302091854257, abs=1e-9)  # SciPy ttest_ind(equal_var=False)


def test_accuracy_intervals_are_truncated_to_the_range_and_marked():
    near_ceiling = mean_interval([99.9, 98.0, 100.0])
    assert near_ceiling.high > 100
    cut = within_range(near_ceiling, 0.0, 100.0)
    assert cut.high == 100.0 and cut.low == near_ceiling.low and cut.truncated == "high" and cut.mean == near_ceiling.mean
    assert within_range(mean_interval([50.0, 51.0, 52.0]), 0.0, 100.0).truncated == ""
    assert within_range(mean_interval([1.0]), 0.0, 100.0).low is None
