"""Settings that change the computation but not the keys are checked when the source model or its config is known,
and listed as unchecked in the report when only a state dict is."""

import json

import pytest
import torch

from interop_peers import SMALL, images, timm_model
from layerscale import create_model
from layerscale.interop import convert_with_report, load_pretrained_into
from layerscale.interop.settings import compare_settings, config_settings, model_settings

pytest.importorskip("timm")


def our_vit(**overrides):
    return create_model("vit", **{**SMALL, "no_embed_class": False, **overrides}).eval()


@pytest.mark.parametrize("timm_kw, setting", [
    ({"global_pool": "avg", "fc_norm": False}, "pooling"),
    ({"act_layer": "gelu_tanh"}, "activation"),
    ({"norm_layer": lambda dim, **kw: torch.nn.LayerNorm(dim, eps=1e-5, **kw)}, "norm_eps"),
    ({"num_heads": 2}, "num_heads"),
])
def test_timm_vit_with_same_keys_but_other_computation_is_refused(timm_kw, setting):
    peer = timm_model("vit_small_patch16_224", init_values=1e-5, **timm_kw)
    ours = our_vit()
    assert set(peer.state_dict()) == set(ours.state_dict())  # the keys alone cannot tell
    with pytest.raises(ValueError, match=rf"different functions with these weights: .*{setting} \("):
        load_pretrained_into(ours, peer, source="timm_vit")


def test_our_model_into_a_timm_vit_of_other_pooling_is_refused():
    peer = timm_model("vit_small_patch16_224", init_values=1e-5, global_pool="avg", fc_norm=False)
    with pytest.raises(ValueError, match=r"pooling \(checkpoint's source model 'token', VisionTransformer 'avg'\)"):
        load_pretrained_into(peer, our_vit())


def test_timm_vit_object_with_same_settings_loads_with_equal_outputs():
    peer = timm_model("vit_small_patch16_224", init_values=1e-5)
    ours = our_vit()
    report = load_pretrained_into(ours, peer)
    assert report.unchecked == []
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), atol=1e-5, rtol=0)


def test_timm_cait_object_loads_and_layer_scale_absence_is_refused():
    peer = timm_model("cait_xxs24_224")
    ours = create_model("cait_xxs24_224", **SMALL).eval()
    load_pretrained_into(ours, peer)
    vit_without_ls = timm_model("vit_small_patch16_224")  # init_values=None: no LayerScale
    with pytest.raises(ValueError, match=r"layer_scale \(checkpoint's source model 'none', VisionTransformer 'both'\)"):
        compare_settings(model_settings(vit_without_ls), model_settings(our_vit()), "checkpoint's source model",
                         "VisionTransformer")


def test_state_dict_only_reports_the_settings_it_cannot_check():
    peer = timm_model("vit_small_patch16_224", init_values=1e-5, global_pool="avg", fc_norm=False)
    report = load_pretrained_into(our_vit(), peer.state_dict(), source="timm_vit")
    assert report.unchecked == ["pooling", "activation", "norm_eps", "num_heads"]
    assert any(line.startswith("  not checked") and "pooling" in line for line in report.lines())
    _, report = convert_with_report(peer.state_dict(), "timm_vit", "hf_dinov2")
    assert "activation" in report.unchecked


def test_missing_qkv_bias_is_refused_even_when_not_strict():
    peer = timm_model("vit_small_patch16_224", init_values=1e-5, qkv_bias=False)
    ours = our_vit()
    with pytest.raises(ValueError, match="qkv_bias=False"):
        load_pretrained_into(ours, peer.state_dict(), source="timm_vit", strict=False)
    with pytest.raises(ValueError, match=r"qkv_bias \(checkpoint's source model False, VisionTransformer True\)"):
        load_pretrained_into(ours, peer)
    load_pretrained_into(our_vit(qkv_bias=False), peer)


def test_hf_dinov2_config_activation_is_checked(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=32,
                                       patch_size=8, layerscale_value=0.1, hidden_act="silu")
    torch.manual_seed(0)
    peer = transformers.Dinov2Model(config).eval()
    ours = create_model("vit", img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, num_classes=5,
                        no_embed_class=False)
    with pytest.raises(ValueError, match=r"activation \(checkpoint's source model 'silu', VisionTransformer 'gelu'\)"):
        load_pretrained_into(ours, peer, strict=False)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    with pytest.raises(ValueError, match="activation"):
        load_pretrained_into(ours, peer.state_dict(), strict=False, config=path)
    config.hidden_act = "gelu"
    report = load_pretrained_into(ours, transformers.Dinov2Model(config).state_dict(), strict=False, config=config)
    assert report.unchecked == []


def test_config_settings_refuses_foreign_configs(tmp_path):
    with pytest.raises(ValueError, match="only Hugging Face DINOv2"):
        config_settings({"model_type": "vit"})
    bad = tmp_path / "config.json"
    bad.write_text("[" * 100_000)
    with pytest.raises(ValueError, match="config.json: refused \\(nested too deep\\)"):
        config_settings(bad)


def test_convert_checks_a_source_config_against_the_model(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    from layerscale.checkpoint_io import save_safetensors_atomic
    from layerscale.cli import main

    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=32,
                                       patch_size=8, hidden_act="silu")
    src, config_path, dst = tmp_path / "hf.safetensors", tmp_path / "config.json", tmp_path / "out.safetensors"
    save_safetensors_atomic(transformers.Dinov2Model(config).state_dict(), src)
    config_path.write_text(json.dumps(config.to_dict()))
    assert main(["convert", str(src), str(dst), "--source-config", str(config_path), "--model", "vit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "activation (source config" in err[0] and "'silu'" in err[0], err
    assert not dst.exists()
    assert main(["convert", str(src), str(dst), "--source-config", str(config_path)]) == 2
    assert "--source-config is checked against a model" in capsys.readouterr().err
    assert main(["convert", str(src), str(dst)]) == 0
    assert "not checked (keys cannot show them" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_source_config_that_is_a_fifo_or_a_link_is_refused_without_reading_it(tmp_path, kind):
    import os

    from layerscale.interop.settings import config_settings

    path = tmp_path / "config.json"
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block forever
    else:
        path.symlink_to("/dev/zero")  # reading it would never end
    with pytest.raises(ValueError, match="refused"):
        config_settings(path)
