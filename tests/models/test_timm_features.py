"""timm's feature and head interface on our models, equal to timm's own models at the same weights:
``features_only`` / ``out_indices``, ``dynamic_img_size``, ``reset_classifier(n, global_pool='avg')`` and
``prune_intermediate_layers`` (item 4 of issue 28)."""

from __future__ import annotations

import pytest
import torch

import layerscale
from layerscale import load_pretrained_into

timm = pytest.importorskip("timm")

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=4, num_heads=4, num_classes=7)
PEERS = {"vit": ("deit3_small_patch16_224", "ls_deit3_small_patch16_224", {}),
         "cait": ("cait_xxs24_224", "ls_cait_xxs24_224", {"depth_token_only": 1})}


def _pair(kind: str, **extra):
    """timm's model and ours (through timm's registry) with the same random weights, norms and scales."""
    layerscale.register_timm()
    peer_name, our_name, more = PEERS[kind]
    torch.manual_seed(0)
    peer = timm.create_model(peer_name, **TINY, **more, **extra).eval()
    with torch.no_grad():
        for p in peer.parameters():
            if p.dim() == 1:
                p.copy_(0.5 + 0.3 * torch.randn_like(p))
    ours = timm.create_model(our_name, **TINY, **more, **extra).eval()
    load_pretrained_into(ours, peer)
    return peer, ours


def _images(height=32, width=32):
    return torch.randn(2, 3, height, width, generator=torch.Generator().manual_seed(3))


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["vit", "cait"])
@pytest.mark.parametrize("out_indices", [None, 2, (0, -1)])
def test_features_only_equals_timms_feature_maps(tmp_path, kind, out_indices):
    peer, _ = _pair(kind)
    path = tmp_path / "weights.pth"
    torch.save(peer.state_dict(), path)
    peer_name, our_name, more = PEERS[kind]
    args = {**TINY, **more, "features_only": True, "pretrained": True}
    if out_indices is not None:
        args["out_indices"] = out_indices
    overlay = dict(file=str(path))
    peer_features = timm.create_model(peer_name, pretrained_cfg_overlay={**overlay, "num_classes": 7}, **args).eval()
    layerscale.register_timm()
    our_features = timm.create_model(our_name, pretrained_cfg_overlay=overlay, **args).eval()
    assert our_features.feature_info.channels() == peer_features.feature_info.channels()
    assert our_features.feature_info.reduction() == peer_features.feature_info.reduction()
    x = _images()
    with torch.no_grad():
        maps = our_features(x)
        _same(maps, peer_features(x))
    assert all(m.shape[1:] == (32, 4, 4) for m in maps)


def test_dynamic_img_size_equals_timm_at_another_size():
    peer, ours = _pair("vit", dynamic_img_size=True)
    assert ours.pretrained_cfg["fixed_input_size"] is False
    for size in [(32, 32), (48, 40), (16, 64)]:
        x = _images(*size)
        with torch.no_grad():
            torch.testing.assert_close(ours(x), peer(x), rtol=1e-5, atol=1e-5)
            _same(ours.forward_intermediates(x, indices=2, intermediates_only=True),
                  peer.forward_intermediates(x, indices=2, intermediates_only=True))
    with pytest.raises(ValueError, match="H and W multiples of the patch size 8"):
        ours(_images(36, 32))
    fixed = layerscale.create_model("vit", **TINY)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 3, 32, 32\)"):
        fixed(_images(48, 40))


@pytest.mark.parametrize("kind", ["vit", "cait"])
@pytest.mark.parametrize("global_pool", ["avg", "", "token"])
def test_reset_classifier_with_global_pool_equals_timm(kind, global_pool):
    peer, ours = _pair(kind)
    peer.reset_classifier(5, global_pool=global_pool)
    ours.reset_classifier(5, global_pool=global_pool)
    with torch.no_grad():
        ours.head.load_state_dict(peer.head.state_dict())
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ours.forward_head(ours.forward_features(x), pre_logits=True),
                                   peer.forward_head(peer.forward_features(x), pre_logits=True), rtol=1e-5, atol=1e-5)


def test_global_pool_is_saved_and_loaded(tmp_path):
    model = layerscale.create_model("vit", **TINY)
    model.reset_classifier(3, global_pool="avg")
    model.save_pretrained(tmp_path)
    loaded = layerscale.VisionTransformer.from_pretrained(tmp_path)
    assert loaded.global_pool == "avg"
    x = _images()
    torch.testing.assert_close(loaded(x), model.eval()(x))


@pytest.mark.parametrize("kind", ["vit", "cait"])
@pytest.mark.parametrize(("indices", "prune_norm"), [(2, False), ([1], True)])
def test_prune_intermediate_layers_equals_timm(kind, indices, prune_norm):
    peer, ours = _pair(kind)
    kept = ours.prune_intermediate_layers(indices, prune_norm=prune_norm)
    assert kept == peer.prune_intermediate_layers(indices, prune_norm=prune_norm)
    assert len(ours.blocks) == len(peer.blocks)  # what is left: the same parts (CaiT's scale keys differ by design)
    assert {k.split(".")[0] for k in ours.state_dict()} == {k.split(".")[0] for k in peer.state_dict()}
    assert ours.num_classes == peer.num_classes == 0
    x = _images()
    with torch.no_grad():
        _same(ours.forward_intermediates(x, indices=kept, norm=not prune_norm, intermediates_only=True),
              peer.forward_intermediates(x, indices=kept, norm=not prune_norm, intermediates_only=True))


def test_avg_at_construction_through_timm_is_refused_with_the_reason():
    layerscale.register_timm()
    with pytest.raises(ValueError, match="fc_norm after pooling.*reset_classifier"):
        timm.create_model("ls_vit", global_pool="avg", **TINY)
