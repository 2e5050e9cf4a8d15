"""Export writes only what the target can hold as the same function: a scalar scale (``residual="scalar"``,
``rezero``, ``skipinit``: shape ``(1,)``) has no slot in any format's per-channel ``ls{i}.gamma`` / ``lambda1`` and is
refused in one line (it was written as ``(1,)``, exit 0, and timm's strict load then failed with a raw size
mismatch); a model without LayerScale exported to Hugging Face DINOv2, whose blocks always hold ``lambda1``, gets
``lambda1 = 1`` (before, the keys were missing: a strict load failed, and ``from_pretrained`` would have filled them
with the target config's ``layerscale_value``)."""

import pytest
import torch

from interop_peers import images, randomize_vectors_
from layerscale import create_model
from layerscale.cli import main
from layerscale.interop import convert_with_report, export_state_dict

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")


def _ours(residual):
    return randomize_vectors_(create_model("vit", img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4,
                                           num_classes=5, residual=residual, no_embed_class=False), seed=3).eval()


@pytest.mark.parametrize("residual", ["scalar", "rezero", "skipinit"])
@pytest.mark.parametrize("target", ["timm_vit", "timm_cait", "hf_dinov2"])
def test_a_scalar_scale_in_a_file_is_refused_naming_it_and_the_fold(residual, target):
    """A file carries no residual method (a model object is refused by it first, for rezero and skipinit)."""
    with pytest.raises(ValueError, match=r"blocks\.0\.ls1\.gamma has shape \(1,\); the \w+ format holds a "
                                         r"per-channel scale of shape \(32,\) there; fold the scales") as refused:
        convert_with_report(_ours(residual).state_dict(), "layerscale", target)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("target", ["timm_vit", "hf_dinov2"])
def test_a_scalar_scale_model_is_refused_too(target):
    with pytest.raises(ValueError, match=r"has shape \(1,\); the \w+ format holds a per-channel scale"):
        export_state_dict(_ours("scalar"), target)


def test_the_convert_command_refuses_it_with_status_2_and_writes_nothing(tmp_path, capsys):
    from safetensors.torch import save_file

    source = tmp_path / "scalar.safetensors"
    save_file(_ours("scalar").state_dict(), str(source))
    assert main(["convert", str(source), str(tmp_path / "out.safetensors"), "--to", "timm_vit"]) == 2
    assert "has shape (1,); the timm_vit format holds a per-channel scale" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scalar.safetensors"]


def test_a_per_channel_scale_still_exports_exactly_to_timm():
    ours = _ours("layerscale")
    peer = timm.create_model("vit_small_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                             depth=2, num_heads=4, num_classes=5, init_values=1e-5).eval()
    peer.load_state_dict(export_state_dict(ours, "timm_vit"), strict=True)
    x = images(seed=1)
    with torch.no_grad():
        torch.testing.assert_close(peer(x), ours(x), atol=1e-5, rtol=0)


def test_a_model_without_layerscale_becomes_dinov2_with_unit_scales_and_the_same_features():
    ours = _ours("prenorm")
    exported, report = convert_with_report(ours.state_dict(), "layerscale", "hf_dinov2")
    scales = [k for k in exported if k.endswith(".lambda1")]
    assert len(scales) == 4 and all(torch.equal(exported[k], torch.ones(32)) for k in scales)
    assert any("lambda1 (4 tensors)" in key and reason.startswith("ones") for key, reason in report.added)
    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=32,
                                       patch_size=8, layerscale_value=0.1)  # not 1: a fill from it would differ
    peer = transformers.Dinov2Model(config).eval()
    peer.load_state_dict(exported, strict=True)
    x = images(seed=2)
    with torch.no_grad():
        torch.testing.assert_close(peer(pixel_values=x).last_hidden_state, ours.forward_features(x),
                                   atol=1e-5, rtol=0)
