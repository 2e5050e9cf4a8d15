"""Official CaiT and DeiT III files ({"model": ...}, optional "module." prefix) load into our models; our reading
agrees with timm's own loader for those files."""

import re

import pytest
import torch

from interop_peers import SMALL, images, timm_model
from layerscale import create_model
from layerscale.interop import convert_state_dict, export_state_dict, load_pretrained_into, normalize_checkpoint

pytest.importorskip("timm")


def official_file(state_dict, prefix):
    """The layout of the files on dl.fbaipublicfiles.com: weights under "model", saved from DDP or not."""
    return {"model": {prefix + k: v for k, v in state_dict.items()}, "epoch": 299, "args": {"lr": 5e-4}}


@pytest.mark.parametrize("prefix", ["", "module."])
def test_official_cait_file_loads_with_equal_outputs(tmp_path, prefix):
    peer = timm_model("cait_xxs24_224")
    path = tmp_path / "XXS24_224.pth"
    torch.save(official_file(peer.state_dict(), prefix), path)
    ours = create_model("cait_xxs24_224", **SMALL).eval()
    report = load_pretrained_into(ours, path)
    assert report.source == "timm_cait"
    assert "weights found under 'model'" in report.notes
    assert ("prefix 'module.' stripped" in report.notes) == bool(prefix)
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), atol=1e-5, rtol=0)


def test_official_cait_keys_agree_with_timms_own_filter():
    from timm.models.cait import checkpoint_filter_fn

    peer = timm_model("cait_xxs24_224")
    checkpoint = official_file(peer.state_dict(), "module.")
    ours = convert_state_dict(normalize_checkpoint(checkpoint)[0], target="timm_cait")
    theirs = checkpoint_filter_fn(checkpoint)
    assert ours.keys() == theirs.keys()


def to_official_deit3(timm_state_dict):
    # models_v2.py Layer_scale_init_Block stores bare gamma_1 / gamma_2; everything else has timm's names.
    return {re.sub(r"ls([12])\.gamma", r"gamma_\1", k): v for k, v in timm_state_dict.items()}


def test_official_deit3_file_loads_and_agrees_with_timms_filter(tmp_path):
    from timm.models.vision_transformer import checkpoint_filter_fn

    peer = timm_model("deit3_small_patch16_224")
    official = to_official_deit3(peer.state_dict())
    assert "blocks.0.gamma_1" in official and not any(".ls1." in k for k in official)
    path = tmp_path / "deit_3_small_224_1k.pth"
    torch.save({"model": official}, path)
    ours = create_model("deit3_small_patch16_224", **SMALL).eval()
    report = load_pretrained_into(ours, path)
    assert report.source == "deit3_official"
    assert report.counts["blocks.{i}.gamma_1 -> blocks.{i}.ls1.gamma"] == SMALL["depth"]
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), atol=1e-5, rtol=0)
    theirs = checkpoint_filter_fn(dict(official), peer, adapt_layer_scale=True)
    assert theirs.keys() == ours.state_dict().keys()
    assert export_state_dict(ours, "deit3_official").keys() == official.keys()
