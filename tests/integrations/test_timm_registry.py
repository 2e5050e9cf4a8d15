"""Our models in timm's registry, exercised through timm's own functions; create_model(pretrained=True) from a file."""

from __future__ import annotations

import pytest
import torch

timm = pytest.importorskip("timm")
import timm.data  # noqa: E402
import timm.optim  # noqa: E402
import timm.utils  # noqa: E402

from layerscale import CaiT, VisionTransformer, create_model, list_models, register_timm  # noqa: E402

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, num_classes=5)


@pytest.fixture(scope="module")
def names():
    return register_timm()


def test_every_image_model_is_registered_with_the_prefix(names):
    image_models = [n for n in list_models() if not n.startswith("gpt")]
    assert names == ["ls_" + n for n in image_models]
    assert set(names) <= set(timm.list_models("ls_*"))
    assert register_timm() == names  # a second call changes nothing
    # timm's own models of the same configuration are untouched
    assert type(timm.create_model("cait_xxs24_224", pretrained=False, **TINY)).__module__.startswith("timm.")


def test_timm_create_model_builds_ours_with_timms_arguments(names):
    model = timm.create_model("ls_cait_xxs24_224", pretrained=False, pretrained_cfg=None, pretrained_cfg_overlay=None,
                              cache_dir="/nonexistent/cache", drop_path_rate=None, global_pool="token",
                              init_values=0.125, **TINY)
    assert isinstance(model, CaiT) and model.num_classes == 5
    assert model.blocks[0].ls1.gamma.unique().tolist() == [0.125]
    assert model.pretrained_cfg["architecture"] == "cait_xxs24_224"
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 5)
    with pytest.raises(ValueError, match="global_pool='avg'"):
        timm.create_model("ls_vit", global_pool="avg", **TINY)
    with pytest.raises(ValueError, match="needs local weights"):
        timm.create_model("ls_vit", pretrained=True, **TINY)


def test_create_optimizer_v2_keeps_tokens_and_scales_out_of_weight_decay(names):
    model = timm.create_model("ls_vit", **TINY)
    optimizer = timm.optim.create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05)
    name_of = {id(p): n for n, p in model.named_parameters()}
    decayed = {name_of[id(p)] for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    undecayed = {name_of[id(p)] for g in optimizer.param_groups if g["weight_decay"] == 0 for p in g["params"]}
    assert {"cls_token", "pos_embed", "blocks.0.ls1.gamma", "blocks.1.ls2.gamma"} <= undecayed
    assert decayed == set(name_of.values()) - model.no_weight_decay()
    assert "blocks.0.mlp.fc1.weight" in decayed


@pytest.mark.parametrize("name", ["ls_vit", "ls_cait"])
def test_layer_wise_lr_decay_groups_by_block(names, name):
    model = timm.create_model(name, **TINY)
    optimizer = timm.optim.create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05, layer_decay=0.5)
    scale_of = {}
    name_of = {id(p): n for n, p in model.named_parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            scale_of[name_of[id(p)]] = (group["lr_scale"], group["weight_decay"])
    assert scale_of["pos_embed"][0] < scale_of["blocks.0.attn.qkv.weight"][0] < scale_of["blocks.1.attn.qkv.weight"][0]
    assert scale_of["blocks.1.attn.qkv.weight"][0] < scale_of["head.weight"][0] == 1.0
    assert scale_of["blocks.0.ls1.gamma"][1] == 0.0 and scale_of["blocks.0.attn.qkv.weight"][1] == 0.05


def test_resolve_data_config_reads_the_models_size(names):
    model = timm.create_model("ls_deit3_small_patch16_224", **{**TINY, "img_size": 48, "in_chans": 1})
    config = timm.data.resolve_data_config({}, model=model)
    assert config["input_size"] == (1, 48, 48)
    assert config["interpolation"] == "bicubic" and len(config["mean"]) == 1
    transform = timm.data.create_transform(**config)
    assert transform is not None


def test_model_ema_v3_tracks_our_model(names):
    model = timm.create_model("ls_vit", **TINY)
    ema = timm.utils.ModelEmaV3(model, decay=0.5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    ema.update(model, step=10)
    torch.testing.assert_close(ema.module.cls_token, model.cls_token - 0.5)
    assert ema.module(torch.randn(1, 3, 32, 32)).shape == (1, 5)


def test_pretrained_loads_a_local_file_through_the_converter(tmp_path, names):
    safetensors = pytest.importorskip("safetensors.torch")
    torch.manual_seed(0)
    source = create_model("cait_xxs24_224", **TINY)
    path = tmp_path / "weights.safetensors"
    safetensors.save_file(source.state_dict(), str(path))
    x = torch.randn(2, 3, 32, 32)
    for model in (create_model("cait_xxs24_224", pretrained=True, pretrained_cfg_overlay=dict(file=str(path)), **TINY),
                  timm.create_model("ls_cait_xxs24_224", pretrained=True,
                                    pretrained_cfg_overlay=dict(file=str(path)), **TINY),
                  timm.create_model("ls_cait_xxs24_224", pretrained=True, pretrained_cfg=dict(file=str(path)),
                                    cache_dir=str(tmp_path / "unused"), **TINY),
                  timm.create_model("ls_cait_xxs24_224", checkpoint_path=str(path), **TINY)):
        torch.testing.assert_close(model.eval()(x), source.eval()(x))
    # a timm checkpoint of timm's own CaiT loads too (any format load_pretrained_into knows)
    peer = timm.create_model("cait_xxs24_224", pretrained=False, **TINY, depth_token_only=2).eval()
    peer_path = tmp_path / "timm_cait.safetensors"
    safetensors.save_file(peer.state_dict(), str(peer_path))
    ours = create_model("cait_xxs24_224", pretrained=True, pretrained_cfg_overlay=dict(file=str(peer_path)), **TINY)
    torch.testing.assert_close(ours.eval()(x), peer(x), rtol=1e-5, atol=1e-5)
    # another number of classes: the backbone loads, the head is new
    other = create_model("cait_xxs24_224", pretrained=True, pretrained_cfg_overlay=dict(file=str(path)),
                         **{**TINY, "num_classes": 3})
    torch.testing.assert_close(other.blocks[0].attn.qkv.weight, source.blocks[0].attn.qkv.weight)
    assert other.head.out_features == 3


def test_pretrained_errors_are_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"pretrained=True for 'vit' needs local weights: pass "
                                         r"pretrained_cfg_overlay=dict\(file=PATH\)") as info:
        create_model("vit", pretrained=True)
    assert "\n" not in str(info.value)
    with pytest.raises(FileNotFoundError, match="missing.safetensors: pretrained weights file not found"):
        create_model("vit", pretrained=True, pretrained_cfg_overlay=dict(file=str(tmp_path / "missing.safetensors")))
    with pytest.raises(ValueError, match="pretrained=False"):
        create_model("vit", pretrained_cfg_overlay=dict(file="x.pth"))
    with pytest.raises(ValueError, match="pretrained must be True or False"):
        create_model("vit", pretrained="yes")
    assert isinstance(create_model("vit", **TINY), VisionTransformer)
