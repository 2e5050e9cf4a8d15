"""Multiplicity adjustments, interaction contrasts and the two-level bootstrap against hand computations."""

import math
import statistics

import pytest
import torch

from layerscale.study.report.contrasts import DEPTH_GAIN, INTERACTION, depth_contrasts
from layerscale.study.design.grid import StudySpec
from layerscale.stats.intervals import mean_interval, paired_interval, t_quantile
from layerscale.stats.multiplicity import adjust, benjamini_hochberg, holm
from layerscale.study.report.results import CellResult
from layerscale.stats.sampling_noise import bootstrap_interval, two_level_bootstrap
from layerscale.study.report.verdicts import EXPLORATORY, PRIMARY, assign_families
from study_helpers import TINY_BASE

P = [0.01, 0.04, 0.03, 0.005, 0.2]


def test_holm_by_hand():
    # sorted: 0.005 (x5), 0.01 (x4), 0.03 (x3), 0.04 (x2), 0.2 (x1) -> 0.025, 0.04, 0.09, 0.08 -> 0.09 (monotone), 0.2
    assert holm(P) == pytest.approx([0.04, 0.09, 0.09, 0.025, 0.2])


def test_benjamini_hochberg_by_hand():
    # m p / rank: 0.005*5/1 = 0.025, 0.01*5/2 = 0.025, 0.03*5/3 = 0.05, 0.04*5/4 = 0.05, 0.2*5/5 = 0.2 (then min from
    # the top down); SciPy's false_discovery_control(P) gives the same [0.025, 0.05, 0.05, 0.025, 0.2]
    assert benjamini_hochberg(P) == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.2])


def test_missing_p_values_are_not_tests():
    assert holm([None, 0.02, None, 0.04]) == pytest.approx([None, 0.04, None, 0.04])
    assert benjamini_hochberg([0.02, None]) == [0.02, None]
    with pytest.raises(ValueError, match="p-value must be in"):
        holm([1.5])
    with pytest.raises(ValueError, match="unknown p-value adjustment"):
        adjust([0.1], "bonferroni")


def _cell(method, depth, test_values, ref_values=None):
    test = mean_interval(test_values)
    diff = None if ref_values is None else paired_interval(dict(enumerate(test_values)), dict(enumerate(ref_values)))
    return CellResult("tuned", method, depth, 1e-3, len(test_values), 0, test, diff, None, 0, None, None,
                      seeds=tuple(range(len(test_values))))


def _two_depth_cells():
    ref = {4: [80.0, 81.0, 80.5], 16: [79.0, 80.5, 79.2]}
    ls = {4: [80.4, 81.2, 80.9], 16: [81.5, 82.8, 81.9]}
    return [_cell("prenorm", d, ref[d]) for d in (4, 16)] + [_cell("layerscale", d, ls[d], ref[d]) for d in (4, 16)]


def test_the_interaction_is_welch_between_the_two_depths_paired_differences_by_hand():
    spec = StudySpec(("prenorm", "layerscale"), (4, 16), (0, 1, 2), TINY_BASE)
    contrasts = depth_contrasts(spec, _two_depth_cells())
    interaction = next(k for k in contrasts if k.kind == INTERACTION)
    d16 = [81.5 - 79.0, 82.8 - 80.5, 81.9 - 79.2]
    d4 = [80.4 - 80.0, 81.2 - 81.0, 80.9 - 80.5]
    mean = statistics.fmean(d16) - statistics.fmean(d4)
    v1, v2 = statistics.variance(d16) / 3, statistics.variance(d4) / 3
    df = (v1 + v2) ** 2 / (v1 ** 2 / 2 + v2 ** 2 / 2)
    half = t_quantile(0.975, df) * math.sqrt(v1 + v2)
    assert (interaction.method, interaction.depth_from, interaction.depth) == ("layerscale", 4, 16)
    assert interaction.diff.mean == pytest.approx(mean, abs=1e-12)
    assert (interaction.diff.low, interaction.diff.high) == pytest.approx((mean - half, mean + half), abs=1e-9)
    gains = {k.method: k for k in contrasts if k.kind == DEPTH_GAIN}
    assert set(gains) == {"prenorm", "layerscale"}
    assert gains["layerscale"].diff.mean == pytest.approx(statistics.fmean([81.5, 82.8, 81.9])
                                                          - statistics.fmean([80.4, 81.2, 80.9]))


def test_the_primary_family_is_holm_adjusted_and_the_rest_bh():
    spec = StudySpec(("prenorm", "layerscale"), (4, 16), (0, 1, 2), TINY_BASE)
    assert spec.primary == ("layerscale@16",)  # the default: every method at the deepest depth
    cells = _two_depth_cells()
    cells, contrasts = assign_families(spec, cells, depth_contrasts(spec, cells))
    by_depth = {c.depth: c for c in cells if c.method == "layerscale"}
    assert by_depth[16].family == PRIMARY and by_depth[16].p_adj == pytest.approx(by_depth[16].p_raw)  # m = 1
    assert by_depth[4].family == EXPLORATORY
    rest = [by_depth[4], *contrasts]
    assert all(x.family == EXPLORATORY for x in rest)
    assert [x.p_adj for x in rest] == pytest.approx(benjamini_hochberg([x.p_raw for x in rest]))
    assert all(c.family == "" for c in cells if c.method == "prenorm")  # the reference compares with nothing


def test_a_shared_row_with_the_tuned_rows_runs_is_counted_once():
    """Both methods chose the shared rate at depth 4: the shared row repeats the tuned row (issue 60). It enters no
    family, takes its twin's p-values and says so; BH runs over the distinct comparisons only."""
    from dataclasses import replace

    spec = StudySpec(("prenorm", "layerscale"), (4, 16), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3))
    tuned = _two_depth_cells()
    shared = [replace(c, table="shared") for c in tuned if c.depth == 4]  # 1e-3 everywhere at depth 4: twins
    shared += [replace(c, table="shared", lr=3e-3) for c in tuned if c.depth == 16 and c.method == "layerscale"]
    shared += [replace(c, table="shared") for c in tuned if c.depth == 16 and c.method == "prenorm"]
    cells, contrasts = assign_families(spec, tuned + shared, depth_contrasts(spec, tuned))
    by = {(c.table, c.depth): c for c in cells if c.method == "layerscale"}
    twin = by[("shared", 4)]
    assert twin.same_runs_as == "tuned" and twin.family == ""
    assert (twin.p_raw, twin.p_adj) == (by[("tuned", 4)].p_raw, by[("tuned", 4)].p_adj)
    assert by[("shared", 16)].same_runs_as == "" and by[("shared", 16)].family == EXPLORATORY
    exploratory = [x for x in (*cells, *contrasts) if x.family == EXPLORATORY]
    assert twin not in exploratory and len(exploratory) == 1 + 1 + len(contrasts)  # tuned@4, shared@16, contrasts
    assert [x.p_adj for x in exploratory] == pytest.approx(benjamini_hochberg([x.p_raw for x in exploratory]))


def test_an_interaction_can_be_named_primary():
    spec = StudySpec(("prenorm", "layerscale"), (4, 16), (0, 1, 2), TINY_BASE,
                     primary=("layerscale@16", "layerscale@4:16"))
    cells, contrasts = assign_families(spec, _two_depth_cells(), depth_contrasts(spec, _two_depth_cells()))
    primary = [x for x in (*cells, *contrasts) if x.family == PRIMARY]
    assert len(primary) == 2
    assert sorted(x.p_adj for x in primary) == pytest.approx(sorted(holm([x.p_raw for x in primary])))
    with pytest.raises(ValueError, match="--primary entry 'layerscale@8'"):
        StudySpec(("prenorm", "layerscale"), (4, 16), (0, 1, 2), TINY_BASE, primary=("layerscale@8",))


def test_two_level_bootstrap_variance_matches_the_hand_computation():
    """Var* = (Var_s(m_s) + mean_s(v_s) / N) / S with divisors S and N (see layerscale.stats.sampling_noise)."""
    outcomes = [[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 0]]
    means = [statistics.fmean(row) for row in outcomes]
    within = [statistics.pvariance(row) for row in outcomes]
    expected = (statistics.pvariance(means) + statistics.fmean(within) / 4) / 3
    draws = two_level_bootstrap(outcomes, draws=40_000, seed=1)
    assert draws.mean().item() == pytest.approx(statistics.fmean(means), abs=0.01)
    assert draws.var().item() == pytest.approx(expected, rel=0.05)


def test_paired_bootstrap_resamples_the_same_seeds_and_examples_for_both():
    method = [[1, 1, 0, 1], [1, 0, 1, 1]]
    # the reference equals the method shifted by the same outcome everywhere: every paired difference is exactly 0
    assert torch.equal(two_level_bootstrap(method, method, draws=50), torch.zeros(50, dtype=torch.float64))
    low, high = bootstrap_interval(two_level_bootstrap([[1, 1, 1, 1]], [[0, 1, 0, 1]], draws=2000))
    assert 0.0 <= low <= 0.5 <= high <= 1.0
    with pytest.raises(ValueError, match="same seeds and examples"):
        two_level_bootstrap([[1, 0]], [[1, 0, 1]])


def test_bootstrap_interval_is_the_percentile_interval():
    stats = torch.arange(1, 1001, dtype=torch.float64)
    low, high = bootstrap_interval(stats)
    assert low == pytest.approx(torch.quantile(stats, 0.025).item()) and high == pytest.approx(
        torch.quantile(stats, 0.975).item())
