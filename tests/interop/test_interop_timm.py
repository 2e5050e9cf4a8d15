"""timm CaiT, ViT and DeiT III state dicts load into our models with equal outputs, and round-trip exactly."""

import pytest
import torch

from interop_peers import SMALL, images, randomize_vectors_, timm_model
from layerscale import create_model
from layerscale.interop import (
    convert_state_dict, detect_format, export_state_dict, format_of_model, load_pretrained_into,
)

pytest.importorskip("timm")

# (timm name, timm extra overrides, our name, our extra overrides, expected detected format)
PEERS = [
    ("cait_xxs24_224", {}, "cait_xxs24_224", {}, "timm_cait"),
    ("vit_small_patch16_224", {"init_values": 1e-5}, "vit", {"no_embed_class": False}, "layerscale"),
    ("deit3_small_patch16_224", {}, "deit3_small_patch16_224", {}, "layerscale"),
]


@pytest.fixture(params=PEERS, ids=[p[0] for p in PEERS], scope="module")
def pair(request):
    timm_name, timm_kw, our_name, our_kw, fmt = request.param
    peer = timm_model(timm_name, **timm_kw)
    ours = create_model(our_name, **SMALL, **our_kw).eval()
    return peer, ours, fmt, (our_name, our_kw)


def test_timm_weights_give_equal_outputs(pair):
    peer, ours, fmt, _ = pair
    assert detect_format(peer.state_dict()) == fmt
    report = load_pretrained_into(ours, peer.state_dict())
    assert sum(report.counts.values()) == len(peer.state_dict())
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), atol=1e-5, rtol=0)


def test_round_trip_ours_timm_ours_is_exact(pair):
    peer, ours, _, _ = pair
    load_pretrained_into(ours, peer.state_dict())
    as_timm = export_state_dict(ours, format_of_model(peer))
    assert as_timm.keys() == peer.state_dict().keys()
    for key, value in peer.state_dict().items():
        assert torch.equal(as_timm[key], value), key
    back = convert_state_dict(as_timm, source=format_of_model(peer))
    assert back.keys() == ours.state_dict().keys()
    for key, value in ours.state_dict().items():
        assert torch.equal(back[key], value), key


def test_our_weights_load_into_timm_with_equal_outputs(pair):
    peer, _, _, (our_name, our_kw) = pair
    torch.manual_seed(3)
    fresh = randomize_vectors_(create_model(our_name, **SMALL, **our_kw), seed=3).eval()
    report = load_pretrained_into(peer, fresh.state_dict())
    assert report.target == format_of_model(peer)
    x = images(seed=5)
    with torch.no_grad():
        torch.testing.assert_close(peer(x), fresh(x), atol=1e-5, rtol=0)


def test_our_vit_uses_timm_vit_keys_verbatim():
    peer = timm_model("vit_small_patch16_224", init_values=1e-5)
    ours = create_model("vit", **SMALL, no_embed_class=False)
    assert ours.state_dict().keys() == peer.state_dict().keys()
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in peer.state_dict().items()}


def test_timm_vit_without_layerscale_loads_into_prenorm_vit():
    peer = timm_model("vit_small_patch16_224")  # init_values=None: no ls1/ls2 keys
    ours = create_model("vit", **SMALL, no_embed_class=False, residual="prenorm").eval()
    load_pretrained_into(ours, peer.state_dict())
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), atol=1e-5, rtol=0)


def test_timm_features_our_vit_lacks_are_refused_by_name():
    peer = timm_model("vit_small_patch16_224", init_values=1e-5, reg_tokens=2, global_pool="avg")
    with pytest.raises(ValueError, match=r"reg_token.*|fc_norm") as err:
        convert_state_dict(peer.state_dict(), source="timm_vit")
    assert "fc_norm.weight" in str(err.value) and "reg_token" in str(err.value)
