"""diagnostics_every: at least 20 records per run, and as few more as the interval allows."""

import pytest

from layerscale.study.design.diagnostics_interval import diagnostics_every, diagnostics_record_count


@pytest.mark.parametrize("total", [1, 5, 19, 20, 38, 39, 100, 150, 937, 1000, 4688, 100_000])
def test_at_least_twenty_records_and_the_interval_is_the_largest_that_gives_them(total):
    every = diagnostics_every(total)
    assert diagnostics_record_count(total, every) >= min(20, total)
    if every > 1 or total >= 19:  # a larger interval would give fewer than 20
        assert diagnostics_record_count(total, every + 1) < 20


def test_record_count_matches_the_callback_rule_by_enumeration():
    for total in (1, 7, 50, 151):
        for every in (1, 2, 7, 50, 200):
            expected = sum(1 for s in range(1, total + 1) if s == 1 or s % every == 0)
            assert diagnostics_record_count(total, every) == expected


def test_examples_by_hand():
    assert diagnostics_every(150) == 7      # 1 + 150 // 7 = 22 records; at 8 only 1 + 18 = 19
    assert diagnostics_every(1000) == 52    # 1 + 19 = 20 records
    assert diagnostics_every(10) == 1       # every step: 10 records, all there are
    assert diagnostics_every(1000, min_records=2) == 1000


@pytest.mark.parametrize("args", [(0,), (-5,), (1.5,), (True,), (100, 1), (100, 0)])
def test_bad_input_is_refused(args):
    with pytest.raises(ValueError, match="must be an integer"):
        diagnostics_every(*args)
