"""Defects found by outside testing: the fold names the model its output loads into, per method; add_layerscale
says a model already has LayerScale and refuses an init_value that is not a number."""

import pytest
import torch

from layerscale import create_model
from layerscale.checkpoint_io import read_state_dict_file, save_safetensors_atomic
from layerscale.cli import main
from layerscale.surgery import add_layerscale
from surgery_models import TINY, inputs_for, ours

pytest.importorskip("safetensors")


@pytest.mark.parametrize("residual, target", [("layerscale", "prenorm"), ("rezero", "tfixup"),
                                               ("skipinit", "tfixup")])
def test_fold_names_the_model_its_output_loads_into(tmp_path, capsys, residual, target):
    model = ours("vit", residual=residual)
    src, dst = tmp_path / "src.safetensors", tmp_path / "folded.safetensors"
    save_safetensors_atomic(model.state_dict(), src)
    assert main(["fold", str(src), str(dst)]) == 0
    assert f'loads into the same model built with residual="{target}"' in capsys.readouterr().out
    plain = create_model("vit", **TINY, residual=target).eval()
    plain.load_state_dict(read_state_dict_file(dst).tensors)  # strict: every key fits
    x = inputs_for(model)
    with torch.no_grad():
        torch.testing.assert_close(plain(x), model(x), atol=1e-5, rtol=0)


def test_add_layerscale_on_timm_cait_says_it_already_has_layerscale():
    timm = pytest.importorskip("timm")
    cait = timm.create_model("cait_xxs24_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32, depth=2,
                             num_heads=4)
    with pytest.raises(ValueError, match=r"Cait already has LayerScale \(\d+ scales, e\.g\. blocks\.0\.gamma_1\)"):
        add_layerscale(cait)


def test_add_layerscale_on_hf_dinov2_says_it_already_has_layerscale():
    transformers = pytest.importorskip("transformers")
    model = transformers.Dinov2Model(transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2,
                                                               num_attention_heads=4, image_size=32, patch_size=8))
    with pytest.raises(ValueError, match=r"Dinov2Model already has LayerScale .*lambda1"):
        add_layerscale(model)


@pytest.mark.parametrize("bad", ["0.1", True, False, b"0.1", [0.1]])
def test_add_layerscale_refuses_an_init_value_that_is_not_a_number(bad):
    with pytest.raises(ValueError, match=r"init_value must be a finite number >= 0, got"):
        add_layerscale(ours("vit", residual="prenorm"), init_value=bad)
