"""Methods without a timm / Hugging Face counterpart refuse checkpoint interop in one line naming the method."""

import pytest
import torch

from layerscale.interop.convert import PEERLESS_RESIDUALS, export_state_dict, load_pretrained_into
from layerscale.models import create_model


def _vit(residual):
    return create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=1, num_heads=2, num_classes=3,
                        residual=residual)


@pytest.mark.parametrize("residual", sorted(PEERLESS_RESIDUALS))
def test_export_to_timm_names_the_method(residual):
    with pytest.raises(ValueError, match=f"residual '{residual}' has no timm_vit checkpoint layout"):
        export_state_dict(_vit(residual), "timm_vit")
    assert export_state_dict(_vit(residual), "layerscale").keys() == _vit(residual).state_dict().keys()


def test_loading_a_timm_checkpoint_into_a_hyper_connection_model_names_the_method():
    timm_keys = export_state_dict(_vit("prenorm"), "timm_vit")
    with pytest.raises(ValueError, match="residual 'hc' has no timm_vit checkpoint layout"):
        load_pretrained_into(_vit("hc"), timm_keys, source="timm_vit", strict=False)
    model = _vit("hc")
    load_pretrained_into(model, {k: v.clone() for k, v in _vit("hc").state_dict().items()})
    assert torch.isfinite(model(torch.randn(1, 3, 8, 8))).all()
