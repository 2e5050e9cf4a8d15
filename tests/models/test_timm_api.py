"""timm's model interface on our models: data config, no-decay names, classifier, features, forward_intermediates
(equal to timm's VisionTransformer / Cait at the same configuration with the same weights), init_values."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from layerscale import CaiT, GPT, VisionTransformer, create_model, list_models, param_groups
from layerscale.models.timm_api import feature_take_indices

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=4, num_classes=7)


def tiny_vit(**overrides) -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(**{**TINY, **overrides}).eval()


def tiny_cait(**overrides) -> CaiT:
    torch.manual_seed(0)
    return CaiT(**{**TINY, "depth_token_only": 1, **overrides}).eval()


def images(batch=2, size=32, chans=3):
    return torch.randn(batch, chans, size, size, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("build", [tiny_vit, tiny_cait, lambda: GPT(embed_dim=32, depth=2, num_heads=2, block_size=8)])
def test_no_weight_decay_equals_the_param_groups_no_decay_group(build):
    model = build()
    decay, no_decay = param_groups(model, 0.05)
    assert model.no_weight_decay() == set(no_decay["param_names"])
    assert not model.no_weight_decay() & set(decay["param_names"])
    names = model.no_weight_decay()
    assert any(name.endswith(".gamma") for name in names)
    if not isinstance(model, GPT):
        assert {"cls_token", "pos_embed"} <= names
        assert "blocks.0.attn.qkv.weight" not in names


def test_pretrained_cfg_follows_the_model():
    model = tiny_vit(in_chans=1, img_size=24, num_classes=5)
    cfg = model.pretrained_cfg
    assert cfg["input_size"] == (1, 24, 24)
    assert cfg["num_classes"] == 5
    assert len(cfg["mean"]) == len(cfg["std"]) == 1
    assert cfg["first_conv"] == "patch_embed.proj" and cfg["classifier"] == "head"
    assert model.default_cfg == cfg
    rgb = tiny_cait().pretrained_cfg
    assert rgb["input_size"] == (3, 32, 32) and rgb["mean"] == (0.485, 0.456, 0.406) and rgb["crop_pct"] == 1.0
    model.pretrained_cfg = {"crop_pct": 0.5, "input_size": (3, 999, 999)}  # the model's own size wins
    assert model.pretrained_cfg["crop_pct"] == 0.5 and model.pretrained_cfg["input_size"] == (1, 24, 24)


@pytest.mark.parametrize("build", [tiny_vit, tiny_cait])
def test_classifier_interface(build):
    model = build()
    x = images()
    features = model.forward_head(model.forward_features(x), pre_logits=True)
    assert features.shape == (2, model.num_features) == (2, 32)
    torch.testing.assert_close(model.get_classifier()(features), model(x))
    model.reset_classifier(3)
    assert model(x).shape == (2, 3) and model.num_classes == 3 and model.pretrained_cfg["num_classes"] == 3
    model.reset_classifier(0, global_pool="token")
    assert isinstance(model.get_classifier(), nn.Identity)
    torch.testing.assert_close(model(x), features)
    with pytest.raises(ValueError, match="global_pool='max': allowed 'token'"):
        model.reset_classifier(3, global_pool="max")
    with pytest.raises(ValueError, match="num_classes must be an int >= 0"):
        model.reset_classifier(-1)


@pytest.mark.parametrize("build", [tiny_vit, tiny_cait])
def test_num_classes_zero_gives_features(build):
    model = build(num_classes=0)
    assert isinstance(model.head, nn.Identity)
    assert model(images()).shape == (2, 32)
    assert not any(name.startswith("head.") for name in model.state_dict())


def test_init_values_is_an_alias_of_init_value():
    assert tiny_cait(init_values=0.25).blocks[0].ls1.gamma.unique().tolist() == [0.25]
    assert tiny_vit(init_values=0.5).blocks[1].ls2.gamma.unique().tolist() == [0.5]
    assert create_model("cait_xxs24_224", **TINY, init_values=0.375).blocks[0].ls1.gamma.unique().tolist() == [0.375]
    with pytest.raises(ValueError, match="init_value=0.1 and init_values=0.2 disagree"):
        tiny_vit(init_value=0.1, init_values=0.2)


def test_list_models_takes_fnmatch_patterns():
    assert list_models("cait*") == [n for n in list_models() if n.startswith("cait")]
    assert "cait_xxs24_224" in list_models("cait_xx*_224") and "cait_s24_384" not in list_models("cait_xx*_224")
    assert list_models("gpt_?ano") == ["gpt_nano"]
    assert list_models("nothing*") == []


def test_feature_take_indices_contract():
    assert feature_take_indices(4, None) == ([0, 1, 2, 3], 3)
    assert feature_take_indices(4, 2) == ([2, 3], 3)
    assert feature_take_indices(4, [0, -1]) == ([0, 3], 3)
    with pytest.raises(ValueError, match="block index 4 is out of range for 4 blocks"):
        feature_take_indices(4, [4])
    with pytest.raises(ValueError, match="last-n must be between 1 and 4"):
        feature_take_indices(4, 5)


def test_gpt_forward_intermediates_are_token_features():
    torch.manual_seed(0)
    model = GPT(embed_dim=32, depth=3, num_heads=2, block_size=8).eval()
    tokens = torch.randint(0, 256, (2, 8))
    final, inter = model.forward_intermediates(tokens, indices=[0, 2], norm=True)
    torch.testing.assert_close(final, model.forward_features(tokens))
    torch.testing.assert_close(inter[1], final)  # the last block, through the final norm
    assert [t.shape for t in inter] == [(2, 8, 32)] * 2
    with pytest.raises(ValueError, match="output_fmt must be 'NLC'"):
        model.forward_intermediates(tokens, output_fmt="NCHW")


# ---- equality with timm -----------------------------------------------------------------------------------------

def _pair(kind: str):
    timm = pytest.importorskip("timm")
    from layerscale import load_pretrained_into

    torch.manual_seed(0)
    if kind == "vit":
        peer = timm.create_model("deit3_small_patch16_224", pretrained=False, **TINY).eval()
        ours = VisionTransformer(**TINY, init_value=1e-6).eval()
    else:
        peer = timm.create_model("cait_xxs24_224", pretrained=False, **TINY, depth_token_only=1).eval()
        ours = CaiT(**TINY, depth_token_only=1).eval()
    with torch.no_grad():  # random non-trivial scales and norms, so that equality means something
        for p in peer.parameters():
            if p.dim() == 1:
                p.copy_(0.5 + 0.3 * torch.randn_like(p))
    load_pretrained_into(ours, peer)
    return peer, ours


INTERMEDIATE_CASES = [
    dict(),
    dict(indices=2),
    dict(indices=[0, -1], norm=True),
    dict(indices=[1], output_fmt="NLC"),
    dict(indices=1, intermediates_only=True),
    dict(indices=[0], stop_early=True, intermediates_only=True, norm=True),
    dict(indices=[1], stop_early=True),
    dict(indices=[0, 2], return_prefix_tokens=True),
    dict(indices=[0, 2], return_prefix_tokens=True, output_fmt="NLC", intermediates_only=True),
]


def _assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    else:
        assert type(a) in (list, tuple) and type(b) in (list, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)


@pytest.mark.parametrize("kind", ["vit", "cait"])
def test_forward_intermediates_equal_timm(kind):
    peer, ours = _pair(kind)
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), rtol=1e-5, atol=1e-5)
        for case in INTERMEDIATE_CASES:
            if kind == "cait" and "return_prefix_tokens" in case:
                # timm's Cait has no prefix tokens in its self-attention blocks, nor the argument: ours ignores it
                _assert_same(ours.forward_intermediates(x, **case),
                             peer.forward_intermediates(x, **{k: v for k, v in case.items()
                                                              if k != "return_prefix_tokens"}))
                continue
            _assert_same(ours.forward_intermediates(x, **case), peer.forward_intermediates(x, **case))
        # pre-logits features equal too
        torch.testing.assert_close(ours.forward_head(ours.forward_features(x), pre_logits=True),
                                   peer.forward_head(peer.forward_features(x), pre_logits=True), rtol=1e-5, atol=1e-5)
    assert ours.num_features == peer.num_features
    assert set(ours.pretrained_cfg) >= {"input_size", "interpolation", "mean", "std", "crop_pct", "num_classes",
                                        "first_conv", "classifier"}
    # timm's own cfg describes the released 224-pixel, 1000-class weights; ours the model as built
    for key in ("interpolation", "mean", "std", "first_conv", "classifier", "fixed_input_size"):
        assert ours.pretrained_cfg[key] == peer.pretrained_cfg[key], key
    assert ours.pretrained_cfg["input_size"] == (3, 32, 32) and ours.pretrained_cfg["num_classes"] == 7


@pytest.mark.parametrize("residual", __import__("layerscale").list_residuals())
def test_forward_intermediates_agree_with_forward_features_for_every_method(residual):
    x = images()
    for model in (tiny_vit(residual=residual), tiny_cait(residual=residual)):
        with torch.no_grad():
            final, inter = model.forward_intermediates(x, indices=[-1], norm=True, output_fmt="NLC")
            features = model.forward_features(x)
        torch.testing.assert_close(final, features)
        if isinstance(model, VisionTransformer):  # the last block, normalised, is forward_features' patch tokens
            torch.testing.assert_close(inter[0], features[:, 1:])
        assert inter[0].shape == (2, 16, 32)
