"""A paired difference the same on every seed has no spread, even when the subtraction leaves rounding noise:
81.72 − 80.41, 83.96 − 82.65 and 91.19 − 89.88 are 1.31 each in the data's precision but differ in the 14th digit;
the row read as sd 8e-15, p 1e-29, "better", printed ``+1.31 [1.31, 1.31]``."""

import pytest

from layerscale.stats.intervals import mean_interval, p_value, paired_interval, spread, welch_interval
from layerscale.study.report.verdicts import verdict

METHOD = {0: 81.72, 1: 83.96, 2: 91.19}
REFERENCE = {0: 80.41, 1: 82.65, 2: 89.88}


def test_a_constant_difference_up_to_rounding_is_no_spread():
    differences = [METHOD[s] - REFERENCE[s] for s in range(3)]
    assert len(set(differences)) > 1  # the floats do differ: the case the rule is for
    interval = paired_interval(METHOD, REFERENCE)
    assert interval.std == 0.0 and p_value(interval) is None
    assert verdict(interval, True) == "no spread"


def test_a_real_spread_is_kept():
    assert spread([1.31, 1.32, 1.31]) == pytest.approx(0.0057735, rel=1e-4)
    interval = mean_interval([90.0, 90.0, 90.0 + 1e-6])
    assert interval.std > 0 and p_value(interval) is not None


def test_welch_of_two_cells_equal_up_to_rounding_is_no_spread():
    first = mean_interval([0.1 + 0.2, 0.3, 0.3])
    second = mean_interval([1.0, 1.0, 1.0])
    difference = welch_interval(first, second)
    assert difference.std == 0.0 and p_value(difference) is None
