"""``angular_distance(eps=-1)`` gave NaN for a zero vector (its norm divided by a clamp at -1): ``eps`` is a finite
number > 0, else one line."""

import pytest
import torch

from layerscale.analysis.measures.geometry import angular_distance


@pytest.mark.parametrize("eps", [-1, 0, float("nan"), float("inf"), "1e-12", True])
def test_eps_must_be_a_finite_positive_number(eps):
    with pytest.raises(ValueError, match="eps must be a finite number > 0"):
        angular_distance(torch.zeros(2, 4), torch.ones(2, 4), eps=eps)


def test_zero_vectors_keep_their_convention():
    assert angular_distance(torch.zeros(1, 4), torch.ones(1, 4)).tolist() == [0.5]
    assert angular_distance(torch.zeros(1, 4), torch.zeros(1, 4)).tolist() == [0.0]
