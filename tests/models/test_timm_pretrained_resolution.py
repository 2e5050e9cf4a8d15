"""``pretrained=True`` at another ``img_size`` resamples ``pos_embed`` as timm does: a 48-pixel model from a
32-pixel checkpoint equals timm's own resampled model (item 4 of issue 28)."""

from __future__ import annotations

import pytest
import torch

import layerscale
from layerscale.models.pos_embed_resample import resample_pos_embed

timm = pytest.importorskip("timm")

TINY = dict(patch_size=8, embed_dim=32, depth=3, num_heads=4, num_classes=7)


def _checkpoint(tmp_path, name, **extra):
    torch.manual_seed(0)
    peer = timm.create_model(name, pretrained=False, img_size=32, **TINY, **extra)
    with torch.no_grad():
        peer.pos_embed.normal_()  # a non-trivial embedding, so that resampling it means something
    path = tmp_path / "weights.pth"
    torch.save(peer.state_dict(), path)
    return path


@pytest.mark.parametrize("class_token_position", [False, True])
def test_pretrained_at_48_from_a_32_checkpoint_equals_timms_resampled_model(tmp_path, class_token_position):
    extra = {"no_embed_class": not class_token_position}
    path = _checkpoint(tmp_path, "deit3_small_patch16_224", **extra)
    overlay = dict(file=str(path))
    # num_classes=7 in timm's overlay too: timm otherwise drops a head of another size than its config's 1000
    peer = timm.create_model("deit3_small_patch16_224", pretrained=True, img_size=48, **TINY, **extra,
                             pretrained_cfg_overlay={**overlay, "num_classes": 7}).eval()
    ours = layerscale.create_model("deit3_small_patch16_224", pretrained=True, pretrained_cfg_overlay=overlay,
                                   img_size=48, **TINY, **extra).eval()
    assert ours.pos_embed.shape == peer.pos_embed.shape == (1, 36 + class_token_position, 32)
    torch.testing.assert_close(ours.pos_embed, peer.pos_embed, rtol=0, atol=0)
    images = torch.randn(2, 3, 48, 48, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(images), peer(images), rtol=1e-5, atol=1e-5)


def test_registered_timm_name_resamples_too(tmp_path):
    layerscale.register_timm()
    path = _checkpoint(tmp_path, "deit3_small_patch16_224")
    model = timm.create_model("ls_deit3_small_patch16_224", pretrained=True, img_size=64, **TINY,
                              pretrained_cfg_overlay=dict(file=str(path)))
    assert model.pos_embed.shape == (1, 64, 32) and model.pretrained_cfg["input_size"] == (3, 64, 64)


def test_cait_resamples_with_the_same_rule(tmp_path):
    torch.manual_seed(0)
    source = layerscale.create_model("cait_xxs24_224", img_size=32, **TINY)
    path = tmp_path / "cait.pth"
    torch.save(source.state_dict(), path)
    model = layerscale.create_model("cait_xxs24_224", pretrained=True, pretrained_cfg_overlay=dict(file=str(path)),
                                    img_size=48, **TINY)
    torch.testing.assert_close(model.pos_embed, resample_pos_embed(source.pos_embed.detach(), (6, 6)))


def test_a_grid_that_is_not_square_is_refused():
    with pytest.raises(ValueError, match="pos_embed has 12 grid tokens .* not a square grid"):
        resample_pos_embed(torch.zeros(1, 13, 4), (4, 4), num_prefix_tokens=1)
