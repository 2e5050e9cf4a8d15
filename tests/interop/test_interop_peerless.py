"""Methods without a timm / Hugging Face counterpart refuse checkpoint interop in one line naming the method: every
method but Pre-LN and the LayerScale family. Post-LN, DeepNorm, LayerNorm Scaling and others have Pre-LN's keys, so
an export to timm loaded strictly there and computed another function (LayerNorm Scaling: logits 0.26 apart)."""

import pytest
import torch

from layerscale.interop.convert import PEER_RESIDUALS, export_state_dict, load_pretrained_into
from layerscale.models import create_model
from layerscale.residual import list_residuals

PEERLESS = sorted(set(list_residuals()) - PEER_RESIDUALS)


def _vit(residual, depth=1):
    return create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=depth, num_heads=2, num_classes=3,
                        residual=residual)


def test_the_peerless_methods_include_those_with_pre_ln_keys():
    assert {"postnorm", "deepnorm", "lns", "rezero", "hc", "mhc", "normformer", "admin"} <= set(PEERLESS)
    assert PEER_RESIDUALS <= set(list_residuals())


@pytest.mark.parametrize("residual", PEERLESS)
def test_export_to_timm_names_the_method(residual):
    with pytest.raises(ValueError, match=f"residual '{residual}' has no timm_vit checkpoint layout"):
        export_state_dict(_vit(residual), "timm_vit")
    assert export_state_dict(_vit(residual), "layerscale").keys() == _vit(residual).state_dict().keys()


def test_an_lns_model_no_longer_exports_to_a_timm_model_computing_another_function():
    timm = pytest.importorskip("timm")
    ours = _vit("lns", depth=4).eval()
    with pytest.raises(ValueError, match="residual 'lns' has no timm_vit checkpoint layout"):
        export_state_dict(ours, "timm_vit")
    layerscale = _vit("layerscale", depth=4).eval()  # a peer method still exports, and computes the same there
    peer = timm.create_model("vit_tiny_patch16_224", img_size=8, patch_size=4, embed_dim=16, depth=4, num_heads=2,
                             num_classes=3, init_values=layerscale.blocks[0].ls1.gamma.detach()[0].item(),
                             no_embed_class=True, in_chans=3).eval()
    peer.load_state_dict(export_state_dict(layerscale, "timm_vit"))
    x = torch.randn(2, 3, 8, 8)
    assert torch.allclose(peer(x), layerscale(x), atol=1e-5)


def test_loading_a_timm_checkpoint_into_a_hyper_connection_model_names_the_method():
    timm_keys = export_state_dict(_vit("prenorm"), "timm_vit")
    with pytest.raises(ValueError, match="residual 'hc' has no timm_vit checkpoint layout"):
        load_pretrained_into(_vit("hc"), timm_keys, source="timm_vit", strict=False)
    model = _vit("hc")
    load_pretrained_into(model, {k: v.clone() for k, v in _vit("hc").state_dict().items()})
    assert torch.isfinite(model(torch.randn(1, 3, 8, 8))).all()


def test_a_state_dict_of_ours_leaves_the_residual_method_unchecked_and_says_so():
    """Post-LN and DeepNorm weights have Pre-LN's keys: from a bare state dict the method cannot be checked, so the
    report lists it; from the model object it is compared and refused."""
    report = load_pretrained_into(_vit("deepnorm"), _vit("postnorm").state_dict())
    assert "block" in report.unchecked
    with pytest.raises(ValueError, match="block"):
        load_pretrained_into(_vit("deepnorm"), _vit("postnorm"))
