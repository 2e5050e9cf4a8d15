"""A named model keeps its official LayerScale ε when ``depth`` is overridden with its own depth; another depth
re-derives ε from the depth rule. drop_path_rates matches timm for a one-block linear schedule."""

import pytest
import torch

from layerscale import create_model
from layerscale.layers.drop_path import drop_path_rates


def test_own_depth_keeps_the_official_epsilon():
    with torch.device("meta"):
        named = create_model("cait_xxs36_224")
        same = create_model("cait_xxs36_224", depth=36)
        other = create_model("cait_xxs36_224", depth=12)
    assert named.init_value == same.init_value == 1e-5  # the official code's value (the depth rule says 1e-6)
    assert other.init_value == 0.1


@pytest.mark.parametrize("depth, rate, expected", [(1, 0.1, [0.0]), (2, 0.1, [0.0, 0.1]), (3, 0.2, [0.0, 0.1, 0.2])])
def test_linear_drop_path_rates_match_timm(depth, rate, expected):
    assert drop_path_rates(depth, rate) == pytest.approx(expected)
    assert drop_path_rates(depth, rate) == pytest.approx(torch.linspace(0, rate, depth).tolist())  # timm's rule
    assert drop_path_rates(depth, rate, "uniform") == [rate] * depth
