"""Bad inputs to folding and pruning: an ``inplace`` that is not a bool (the string ``"no"`` is truthy and used to
change the caller's model), a scale of the wrong shape in a state dict (used to be flattened to fit), and a state
dict that is not a mapping of names to tensors. Each is a one-line ``ValueError`` that changes nothing."""

import copy

import numpy as np
import pytest
import torch

from layerscale import create_model
from layerscale.surgery import fold_layerscale, fold_state_dict
from layerscale.surgery.pruning.prune import prune

SMALL = dict(img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, num_classes=3)


def _vit(**overrides):
    torch.manual_seed(0)
    return create_model("vit", **{**SMALL, **overrides}).eval()


def _message(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    return message


def _same(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("bad", ["no", "False", 0, 1, None])
@pytest.mark.parametrize("surgery", ["fold", "prune", "grow", "add_layerscale"])
def test_inplace_must_be_a_bool_and_the_model_is_left_unchanged(surgery, bad):
    from layerscale.surgery import add_layerscale, grow

    model = _vit(residual="prenorm") if surgery == "add_layerscale" else _vit()
    before = copy.deepcopy(model)
    call = {"fold": lambda: fold_layerscale(model, inplace=bad), "prune": lambda: prune(model, [1], inplace=bad),
            "grow": lambda: grow(model, insert=1, inplace=bad),
            "add_layerscale": lambda: add_layerscale(model, 0.1, inplace=bad)}[surgery]
    assert _message(call) == f"inplace must be True or False, got {bad!r}"
    assert _same(model, before) and len(model.blocks) == 2


@pytest.mark.parametrize("surgery", ["fold", "prune"])
def test_inplace_keeps_its_meaning_for_bools(surgery):
    for flag in (False, np.bool_(False)):
        model = _vit()
        before = copy.deepcopy(model)
        out = fold_layerscale(model, inplace=flag) if surgery == "fold" else prune(model, [1], inplace=flag)
        assert out is not model and _same(model, before)
    model = _vit()
    out = fold_layerscale(model, inplace=True) if surgery == "fold" else prune(model, [1], inplace=True)
    assert out is model


@pytest.mark.parametrize("key, bad, expected", [
    ("blocks.0.ls1.gamma", torch.ones(4, 4), "expected (16,), one value per row of blocks.0.attn.proj.weight, or (1,)"),
    ("blocks.0.ls2.gamma", torch.ones(1, 16), "expected (16,), one value per row of blocks.0.mlp.fc2.weight, or (1,)"),
    ("blocks.0.ls2.gamma", torch.ones(()), "expected (16,), one value per row of blocks.0.mlp.fc2.weight, or (1,)"),
    ("blocks.0.ls1.gamma", torch.ones(8), "expected (16,), one value per row of blocks.0.attn.proj.weight, or (1,)"),
])
def test_a_layerscale_of_the_wrong_shape_is_refused_not_flattened(key, bad, expected):
    state = _vit().state_dict()
    state[key] = bad
    assert _message(lambda: fold_state_dict(state)) == f"cannot fold {key} of shape {tuple(bad.shape)}: {expected}"


def test_a_scalar_layerscale_of_shape_1_still_folds():
    state = _vit().state_dict()
    state["blocks.0.ls1.gamma"] = torch.full((1,), 0.5)
    folded, counts = fold_state_dict(state)
    assert counts["ls1.gamma -> attn.proj"] == 2
    torch.testing.assert_close(folded["blocks.0.attn.proj.weight"], 0.5 * state["blocks.0.attn.proj.weight"])


def test_a_head_scale_must_be_one_value_per_head():
    state = _vit(residual="layerscale_head").state_dict()
    proj = "blocks.0.attn.proj.weight"
    state["blocks.0.attn.head_scale.gamma"] = torch.ones(2, 1)
    assert _message(lambda: fold_state_dict(state)) == (
        "cannot fold blocks.0.attn.head_scale.gamma of shape (2, 1): expected (num_heads,), one value per head, "
        f"num_heads dividing the 16 input columns of {proj}")
    state["blocks.0.attn.head_scale.gamma"] = torch.ones(16)  # 16 heads of width 1: only num_heads tells
    fold_state_dict(state)
    assert _message(lambda: fold_state_dict(state, num_heads=2)) == (
        f"cannot fold blocks.0.attn.head_scale.gamma of shape (16,): expected (2,), one value per head of the 16 "
        f"input columns of {proj}")
    state["blocks.0.attn.head_scale.gamma"] = torch.ones(2)
    assert fold_state_dict(state, num_heads=2)[1]["attn.head_scale.gamma -> attn.proj (columns per head)"] == 2


def test_a_talking_heads_head_scale_is_checked_against_its_head_mixing():
    model = create_model("cait", **SMALL, depth_token_only=1, residual="layerscale_head")
    state = model.state_dict()
    assert state["blocks.0.attn.proj_l.weight"].shape == (2, 2)
    state["blocks.0.attn.head_scale.gamma"] = torch.ones(16)
    assert _message(lambda: fold_state_dict(state)) == (
        "cannot fold blocks.0.attn.head_scale.gamma of shape (16,): expected (2,), one value per head of the 16 "
        "input columns of blocks.0.attn.proj.weight")


@pytest.mark.parametrize("bad, got", [
    ([("blocks.0.ls1.gamma", torch.ones(16))], ", got list"),
    (None, ", got NoneType"),
    ({1: torch.ones(16)}, ": the key 1 (int) is not a str"),
    ({"blocks.0.ls1.gamma": [1.0, 2.0]}, ": blocks.0.ls1.gamma holds a value of type list, not a tensor"),
])
def test_fold_state_dict_wants_a_mapping_of_names_to_tensors(bad, got):
    assert _message(lambda: fold_state_dict(bad)) == \
        f"fold_state_dict expects a state dict (a mapping of names to tensors){got}"


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_fold_state_dict_num_heads_must_be_a_positive_int(bad):
    assert _message(lambda: fold_state_dict(_vit().state_dict(), num_heads=bad)) == \
        f"num_heads must be a positive int or None, got {bad!r}"
