"""``layerscale fold``: a checkpoint in any readable format becomes our keys with the scales folded away."""

import pytest
import torch

from layerscale.checkpoint_io import read_state_dict_file
from layerscale.cli import main
from layerscale.interop import export_state_dict
from surgery_models import inputs_for, ours

pytest.importorskip("safetensors")


def test_fold_an_official_cait_file(tmp_path, capsys):
    model = ours("cait")
    src, dst = tmp_path / "S24_224.pth", tmp_path / "folded.safetensors"
    torch.save({"model": export_state_dict(model, "timm_cait")}, src)
    assert main(["fold", str(src), str(dst)]) == 0
    out = capsys.readouterr().out
    assert "format timm_cait" in out and "folded ls1.gamma -> attn.proj: 5" in out  # 3 SA + 2 CA blocks
    loaded = read_state_dict_file(dst)
    assert loaded.metadata["folded"] == "true"
    plain = ours("cait", residual="prenorm")
    plain.load_state_dict(loaded.tensors)
    x = inputs_for(model)
    with torch.no_grad():
        torch.testing.assert_close(plain(x), model(x), atol=1e-5, rtol=0)


def test_fold_refuses_a_checkpoint_without_scales(tmp_path, capsys):
    src, dst = tmp_path / "plain.pt", tmp_path / "out.safetensors"
    torch.save(ours("vit", residual="prenorm").state_dict(), src)
    assert main(["fold", str(src), str(dst)]) == 2
    assert "no LayerScale to fold" in capsys.readouterr().err
    assert not dst.exists()
