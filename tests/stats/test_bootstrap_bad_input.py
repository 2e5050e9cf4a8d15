"""Bad inputs to the bootstrap helpers are refused in one line naming the argument."""
import pytest
import torch

from layerscale import machine
from layerscale.stats import bootstrap_weights, value_shares


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e30])
def test_value_shares_refuses_non_finite_replicates(bad):
    with pytest.raises(ValueError, match="value_shares replicates") as exc:
        value_shares(torch.tensor([1.0, bad, 2.0]))
    assert "\n" not in str(exc.value)


def test_value_shares_of_good_replicates_unchanged():
    assert value_shares(torch.tensor([1.0, 2.0, 2.0, 3.2])) == {1: 0.25, 2: 0.5, 3: 0.25}
    assert value_shares(torch.tensor([4, 4])) == {4: 1.0}


def test_bootstrap_weights_beyond_memory_is_refused_before_allocating(monkeypatch):
    with pytest.raises(ValueError, match="replicates x examples") as exc:
        bootstrap_weights(10**6, 10**6)
    assert "memory" in str(exc.value) and "\n" not in str(exc.value)
    monkeypatch.setattr("layerscale.stats.bootstrap.machine_memory_bytes", lambda: 24 * 50 - 1)
    with pytest.raises(ValueError, match="replicates x examples"):
        bootstrap_weights(10, 5)
    monkeypatch.setattr("layerscale.stats.bootstrap.machine_memory_bytes", lambda: 24 * 50)
    assert bootstrap_weights(10, 5).shape == (5, 10)
    assert machine.machine_memory_bytes() is not None


@pytest.mark.parametrize("seed", [None, 1.5, "0", True, 2**64, -(2**63) - 1])
def test_bootstrap_weights_refuses_a_bad_seed(seed):
    with pytest.raises(ValueError, match="seed") as exc:
        bootstrap_weights(5, 3, seed=seed)
    assert "\n" not in str(exc.value)


def test_bootstrap_weights_good_seeds():
    for seed in (0, 2**63 - 1 + 7919, -1):
        assert bootstrap_weights(4, 2, seed=seed).sum(dim=1).tolist() == [4.0, 4.0]
