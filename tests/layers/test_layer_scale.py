import math
import re

import pytest
import torch

from layerscale.layers import HeadScale, LayerScale, LayerScale2d, ScalarScale, init_value_for_depth


@pytest.mark.parametrize("depth, expected", [(1, 0.1), (12, 0.1), (18, 0.1), (19, 1e-5), (24, 1e-5), (25, 1e-6),
                                             (36, 1e-6), (1000, 1e-6)])
def test_depth_rule_matches_the_paper(depth, expected):
    assert init_value_for_depth(depth) == expected


@pytest.mark.parametrize("depth", [0, -3, 2.5, "12", True])
def test_depth_rule_rejects_bad_depth_naming_the_value(depth):
    with pytest.raises(ValueError, match=f"depth .*got {re.escape(repr(depth))}$"):
        init_value_for_depth(depth)


@pytest.mark.parametrize("bad", [-1e-5, float("nan"), float("inf"), "small", None])
@pytest.mark.parametrize("cls", [LayerScale, LayerScale2d])
def test_bad_init_value_is_a_value_error_naming_it(cls, bad):
    with pytest.raises(ValueError, match="init_value"):
        cls(8, bad)


def test_layer_scale_multiplies_last_dimension():
    ls = LayerScale(4, 0.5)
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(ls(x), 0.5 * x)
    with torch.no_grad():
        ls.gamma.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    torch.testing.assert_close(ls(x), x * torch.tensor([1.0, 2.0, 3.0, 4.0]))


def test_layer_scale_rejects_wrong_width():
    with pytest.raises(ValueError, match=r"last dimension 4.*\(2, 5\)"):
        LayerScale(4)(torch.randn(2, 5))


def test_fused_update_equals_unfused_expression_with_and_without_mask():
    ls = LayerScale(6, 0.3)
    with torch.no_grad():
        ls.gamma.normal_()
    x, y = torch.randn(3, 5, 6), torch.randn(3, 5, 6)
    torch.testing.assert_close(ls.add_to(x, y), x + ls.gamma * y)
    mask = torch.tensor([0.0, 2.0, 2.0]).view(3, 1, 1)
    torch.testing.assert_close(ls.add_to(x, y, mask), x + mask * (ls.gamma * y))


def test_layer_scale_2d_is_channels_first():
    ls = LayerScale2d(3, 1.0)
    with torch.no_grad():
        ls.gamma.copy_(torch.tensor([1.0, 0.0, -2.0]))
    x = torch.randn(2, 3, 4, 5)
    y = ls(x)
    torch.testing.assert_close(y[:, 0], x[:, 0])
    assert torch.count_nonzero(y[:, 1]) == 0
    torch.testing.assert_close(y[:, 2], -2 * x[:, 2])
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        ls(torch.randn(2, 4, 4, 5))


def test_head_scale_scales_each_head_separately():
    hs = HeadScale(2, 1.0)
    with torch.no_grad():
        hs.gamma.copy_(torch.tensor([3.0, 0.5]))
    x = torch.randn(1, 2, 4, 8)
    y = hs(x)
    torch.testing.assert_close(y[:, 0], 3 * x[:, 0])
    torch.testing.assert_close(y[:, 1], 0.5 * x[:, 1])


def test_scalar_scale_starts_at_its_value_and_accepts_zero():
    s = ScalarScale(0.0)
    assert s.gamma.shape == (1,) and s.gamma.item() == 0.0
    x = torch.randn(2, 3)
    assert torch.equal(s.add_to(x, torch.randn(2, 3)), x)


@pytest.mark.parametrize("cls, shape_arg", [(LayerScale, 8), (LayerScale2d, 8), (HeadScale, 4)])
def test_meta_device_then_reset_gives_init_value(cls, shape_arg):
    with torch.device("meta"):
        module = cls(shape_arg, 1e-5)
    module.to_empty(device="cpu")
    module.reset_parameters()
    assert torch.all(module.gamma == 1e-5)
    assert math.isclose(module.gamma[0].item(), 1e-5, rel_tol=1e-6)


@pytest.mark.parametrize("cls, shape", [(LayerScale, (2, 5, 64)), (LayerScale2d, (2, 64, 3, 3))])
def test_timm_spelling_init_values_builds_what_timm_builds(cls, shape):
    timm_layers = pytest.importorskip("timm.layers")
    ours, theirs = cls(64, init_values=1e-3), getattr(timm_layers, cls.__name__)(64, init_values=1e-3)
    assert ours.init_value == 1e-3
    assert ours.state_dict().keys() == theirs.state_dict().keys() == {"gamma"}
    torch.testing.assert_close(ours.gamma, theirs.gamma, rtol=0, atol=0)
    x = torch.randn(*shape)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)
    assert cls(64, 1e-3, init_values=1e-3).init_value == 1e-3  # both spellings, the same value
    with pytest.raises(ValueError, match=r"init_value=0\.1 and init_values=0\.001 disagree"):
        cls(64, 0.1, init_values=1e-3)
    with pytest.raises(ValueError, match="init_value must be a finite number >= 0, got -1"):
        cls(64, init_values=-1)
