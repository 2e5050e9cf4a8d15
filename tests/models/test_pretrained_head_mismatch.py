"""create_model(pretrained=True) with ``num_classes`` given: only the head may keep its random initialisation. The
retry that drops the head loaded with ``strict=False``, so any other key missing from the file (a γ) was silently
left at its initial value, and a head of the right size was dropped too."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("safetensors")
from safetensors.torch import save_file  # noqa: E402

from layerscale import create_model  # noqa: E402

TINY = dict(img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, init_value=0.1)


def _weights(tmp_path, without=()):
    torch.manual_seed(0)
    model = create_model("vit", **TINY, num_classes=3)
    with torch.no_grad():
        for block in model.blocks:
            block.ls1.gamma.uniform_(0.5, 1.0)
    path = tmp_path / "w.safetensors"
    save_file({k: v for k, v in model.state_dict().items() if k not in without}, str(path))
    return model, path


@pytest.mark.parametrize("num_classes", [3, 5])
def test_a_gamma_missing_from_the_file_is_refused_with_num_classes_given(tmp_path, num_classes):
    _, path = _weights(tmp_path, without={"blocks.1.ls2.gamma"})
    with pytest.raises(ValueError, match=r"missing key\(s\) \[blocks\.1\.ls2\.gamma\]") as info:
        create_model("vit", **TINY, num_classes=num_classes, pretrained=True, pretrained_cfg_overlay=dict(file=path))
    assert "\n" not in str(info.value)


def test_another_num_classes_keeps_every_weight_but_the_head(tmp_path):
    saved, path = _weights(tmp_path)
    model = create_model("vit", **TINY, num_classes=5, pretrained=True, pretrained_cfg_overlay=dict(file=path))
    assert model.head.weight.shape == (5, 16)
    assert torch.equal(model.blocks[1].ls1.gamma, saved.blocks[1].ls1.gamma)

