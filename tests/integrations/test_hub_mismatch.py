"""from_pretrained refuses a model.safetensors that does not fit: a head missing from the file is refused unless
another ``num_classes`` asked for a new head (it was left at its random initialisation, silently)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("safetensors")
from safetensors.torch import load_file, save_file  # noqa: E402

from layerscale import CaiT, VisionTransformer  # noqa: E402

TINY = dict(img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=3)


def _saved_without(tmp_path, cls, prefix):
    model = cls(**TINY, init_value=0.1)
    model.save_pretrained(tmp_path)
    tensors = {k: v for k, v in load_file(str(tmp_path / "model.safetensors")).items() if not k.startswith(prefix)}
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    return model


@pytest.mark.parametrize("cls", [VisionTransformer, CaiT])
def test_a_head_missing_from_the_file_is_refused(tmp_path, cls):
    _saved_without(tmp_path, cls, "head.")
    with pytest.raises(ValueError, match=r"missing keys \['head.bias', 'head.weight'\]") as info:
        cls.from_pretrained(tmp_path)
    assert "\n" not in str(info.value)


def test_a_new_head_asked_for_may_be_missing(tmp_path):
    model = _saved_without(tmp_path, VisionTransformer, "head.")
    loaded = VisionTransformer.from_pretrained(tmp_path, num_classes=5)
    assert loaded.head.weight.shape == (5, 16)
    assert torch.equal(loaded.blocks[0].ls1.gamma, model.blocks[0].ls1.gamma)


def test_a_gamma_missing_from_the_file_is_refused(tmp_path):
    _saved_without(tmp_path, VisionTransformer, "blocks.1.ls2.")
    with pytest.raises(ValueError, match=r"missing keys \['blocks.1.ls2.gamma'\]"):
        VisionTransformer.from_pretrained(tmp_path, num_classes=5)
