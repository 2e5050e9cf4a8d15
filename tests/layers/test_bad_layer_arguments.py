"""Bad arguments and inputs of the building blocks: each a one-line ``ValueError`` naming the argument (or both
shapes), at construction where it can be, never torch's own error from deep inside the layer or the fused update."""

import numpy as np
import pytest
import torch

from layerscale.layers import (
    Attention,
    ClassAttention,
    DropPath,
    HeadScale,
    LayerScale,
    LayerScale2d,
    Mlp,
    ScalarScale,
    TalkingHeadAttention,
    drop_path_rates,
)


def _message(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("make, name", [(LayerScale, "dim"), (LayerScale2d, "dim"), (HeadScale, "num_heads")])
@pytest.mark.parametrize("bad", [True, False, 0, -2, 2.0, "8"])
def test_scale_sizes_refuse_bools_and_non_positive_ints(make, name, bad):
    assert _message(lambda: make(bad)) == f"{name} must be a positive int, got {bad!r}"


@pytest.mark.parametrize("residual, branch", [((3, 8), (3, 4)), ((3, 4), (3, 4)), ((3, 8), (2, 8)), ((3, 1, 8), (3, 5, 8))])
def test_layer_scale_update_with_mismatched_shapes_names_both(residual, branch):
    expected = f"LayerScale.add_to expected residual and branch of one shape (..., 8), got residual {residual} and " \
               f"branch {branch}"
    for grad in (False, True):  # the inference path and the fused path with its hand-written backward
        r, b = torch.zeros(residual, requires_grad=grad), torch.zeros(branch)
        assert _message(lambda: LayerScale(8).add_to(r, b)) == expected


def test_scalar_scale_update_with_mismatched_shapes_names_both():
    assert _message(lambda: ScalarScale(0.5).add_to(torch.zeros(3, 8), torch.zeros(3, 4))) == \
        "ScalarScale.add_to expected residual and branch of one shape (..., D), got residual (3, 8) and branch (3, 4)"


@pytest.mark.parametrize("scale", [LayerScale(8), ScalarScale(0.5)], ids=["LayerScale", "ScalarScale"])
@pytest.mark.parametrize("mask", [(3, 2, 1), (2, 1, 1), (3, 1), (3,), (3, 1, 1, 1)])
def test_scale_update_with_a_bad_keep_mask_names_both_shapes(scale, mask):
    x = torch.zeros(3, 2, 8)
    assert _message(lambda: scale.add_to(x, x, torch.ones(mask))) == \
        f"{type(scale).__name__}.add_to expected keep_mask of shape (3, 1, 1) (one factor per sample) for residual " \
        f"(3, 2, 8), got {mask}"


def test_scale_update_still_takes_every_good_shape():
    ls = LayerScale(8, 0.5)
    x, y = torch.randn(3, 2, 8), torch.randn(3, 2, 8)
    for mask in (None, torch.full((3, 1, 1), 2.0), torch.full((1, 1, 1), 2.0)):
        factor = 1.0 if mask is None else 2.0
        torch.testing.assert_close(ls.add_to(x, y, mask), x + factor * 0.5 * y)
    torch.testing.assert_close(ScalarScale(0.5).add_to(x[0, 0], y[0, 0]), x[0, 0] + 0.5 * y[0, 0])


def test_drop_path_needs_a_batch_dimension_when_active():
    assert _message(lambda: DropPath(0.5).train()(torch.tensor(1.0))) == \
        "DropPath drops whole samples: expected an input with a batch dimension (B, ...), got a 0-dimensional tensor"
    assert DropPath(0.5).eval()(torch.tensor(1.0)) == 1.0  # inactive: the identity, as before
    assert DropPath(0.5).train()(torch.ones(4)).shape == (4,)


@pytest.mark.parametrize("bad", ["0.1", "x", True, -0.1, 1.0, float("nan"), None])
def test_drop_path_rates_require_a_real_number_in_0_1(bad):
    assert _message(lambda: drop_path_rates(4, bad)) == f"drop_path_rate must be a number in [0, 1), got {bad!r}"
    assert _message(lambda: DropPath(bad)) == f"drop_prob must be a number in [0, 1), got {bad!r}"


def test_drop_path_rates_keep_ints_floats_and_numpy_scalars():
    assert drop_path_rates(3, 0) == [0.0, 0.0, 0.0]
    assert drop_path_rates(3, np.float32(0.5)) == pytest.approx([0.0, 0.25, 0.5])
    assert drop_path_rates(2, 0.2, "uniform") == [0.2, 0.2]
    assert DropPath(np.float64(0.25)).drop_prob == 0.25
    assert _message(lambda: drop_path_rates("4", 0.1)) == "depth must be an int >= 1, got '4'"


@pytest.mark.parametrize("attention", [Attention, TalkingHeadAttention, ClassAttention])
@pytest.mark.parametrize("bad", [3, 1.0, -0.5, float("nan"), "0.1", True])
def test_attention_dropout_is_checked_at_construction(attention, bad):
    assert _message(lambda: attention(16, 2, attn_drop=bad)) == f"attn_drop must be a number in [0, 1), got {bad!r}"


@pytest.mark.parametrize("attention", [Attention, TalkingHeadAttention, ClassAttention])
def test_attention_dropout_accepts_numpy_scalars(attention):
    module = attention(16, 2, attn_drop=np.float32(0.25)).train()
    assert module(torch.randn(2, 3, 16)).shape[-1] == 16


@pytest.mark.parametrize("kwargs, message", [
    (dict(in_features=16, hidden_features=0), "hidden_features must be a positive int, got 0"),
    (dict(in_features=16, hidden_features=-4), "hidden_features must be a positive int, got -4"),
    (dict(in_features=16, hidden_features=64.0), "hidden_features must be a positive int, got 64.0"),
    (dict(in_features=0, hidden_features=4), "in_features must be a positive int, got 0"),
    (dict(in_features=16, hidden_features=4, out_features=0), "out_features must be a positive int, got 0"),
])
def test_mlp_sizes_must_be_positive_ints(kwargs, message):
    assert _message(lambda: Mlp(**kwargs)) == message


def test_mlp_out_features_defaults_to_in_features():
    assert Mlp(16, 4).fc2.out_features == 16 and Mlp(16, 4, 8).fc2.out_features == 8
