"""The example bootstrap: its percentile intervals reach their nominal coverage on data with a known truth."""

from __future__ import annotations

import pytest
import torch

from layerscale.stats import bootstrap_means, bootstrap_weights, percentile_interval, value_shares

REPETITIONS = 400


def _coverage(samples: torch.Tensor, truth: torch.Tensor, statistic, level: float, replicates: int = 500) -> float:
    """Share of the ``REPETITIONS`` data sets (``samples[r]``: ``(N, K)``) whose interval for ``statistic`` (of the
    replicated column means) holds ``truth``."""
    hits = 0
    for r in range(samples.shape[0]):
        weights = bootstrap_weights(samples.shape[1], replicates, seed=1000 + r)
        low, high = percentile_interval(statistic(bootstrap_means(samples[r], weights)), level)
        hits += bool((low <= truth) & (truth <= high))
    return hits / samples.shape[0]


@pytest.mark.parametrize("level", [0.9, 0.95])
def test_interval_of_a_mean_reaches_nominal_coverage(level):
    g = torch.Generator().manual_seed(0)
    samples = 2.0 + torch.randn(REPETITIONS, 80, 1, generator=g, dtype=torch.float64)
    assert abs(_coverage(samples, torch.tensor(2.0), lambda m: m[:, 0], level) - level) <= 0.03


def test_interval_of_a_skewed_mean_reaches_nominal_coverage():
    g = torch.Generator().manual_seed(1)
    samples = torch.empty(REPETITIONS, 200, 1, dtype=torch.float64).exponential_(1.0, generator=g)  # mean 1
    assert abs(_coverage(samples, torch.tensor(1.0), lambda m: m[:, 0], 0.95) - 0.95) <= 0.03


def test_interval_of_a_paired_difference_of_means_reaches_nominal_coverage():
    """Like an ablation's Δloss: two losses of the same examples, strongly correlated, mean difference 0.05."""
    g = torch.Generator().manual_seed(2)
    base = torch.empty(REPETITIONS, 100, dtype=torch.float64).exponential_(1.0, generator=g)
    other = base + 0.05 + 0.1 * torch.randn(REPETITIONS, 100, generator=g, dtype=torch.float64)
    samples = torch.stack([base, other], dim=2)
    coverage = _coverage(samples, torch.tensor(0.05), lambda m: m[:, 1] - m[:, 0], 0.95)
    assert abs(coverage - 0.95) <= 0.03


def test_weights_resample_every_example_set_and_means_are_weighted_means():
    weights = bootstrap_weights(7, 5, seed=3)
    assert weights.shape == (5, 7) and torch.equal(weights.sum(dim=1), torch.full((5,), 7.0, dtype=torch.float64))
    assert torch.equal(weights, bootstrap_weights(7, 5, seed=3))
    values = torch.arange(14, dtype=torch.float64).reshape(7, 2)
    means = bootstrap_means(values, weights)
    for b in range(5):
        drawn = torch.repeat_interleave(values, weights[b].long(), dim=0)
        assert torch.allclose(means[b], drawn.mean(dim=0))


def test_percentile_interval_and_value_shares():
    low, high = percentile_interval(torch.arange(101, dtype=torch.float64), 0.9)
    assert (float(low), float(high)) == (pytest.approx(5.0), pytest.approx(95.0))
    low, high = percentile_interval(torch.tensor([7.0] * 30 + [8.0] * 40 + [9.0] * 30), 0.95, discrete=True)
    assert (float(low), float(high)) == (7.0, 9.0)
    assert float(percentile_interval(torch.arange(10.0), 0.5)[0]) == pytest.approx(2.25)
    assert float(percentile_interval(torch.arange(10.0), 0.5, discrete=True)[0]) == 2.0
    low, high = percentile_interval(torch.tensor([[1.0, float("nan")], [2.0, 3.0]]), 0.5)
    assert torch.isnan(high[1]) and not torch.isnan(low[0])
    assert value_shares(torch.tensor([7, 8, 8, 9])) == {7: 0.25, 8: 0.5, 9: 0.25}
    for bad in (0.0, 1.0, True):
        with pytest.raises(ValueError, match="level"):
            percentile_interval(torch.zeros(3), bad)
    with pytest.raises(ValueError, match="same N"):
        bootstrap_means(torch.zeros(4, 2), bootstrap_weights(5, 3))
