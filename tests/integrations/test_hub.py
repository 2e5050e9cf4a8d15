"""save_pretrained / from_pretrained on our models: config.json rebuilds the model, model.safetensors holds the
weights, README.md names the method, depth and ε; a Hub id without network fails with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("safetensors")

from layerscale import CaiT, GPT, VisionTransformer, add_layerscale, create_model  # noqa: E402

TINY = dict(img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=3)


def _models():
    torch.manual_seed(0)
    return [
        VisionTransformer(**TINY, init_value=0.01, residual="layerscale"),
        CaiT(**TINY, depth_token_only=1, init_values=1e-5),
        GPT(embed_dim=16, depth=2, num_heads=2, block_size=8, vocab_size=32, residual="prenorm"),
        create_model("deit3_tiny_patch16_224", **TINY),
    ]


def _input(model):
    if isinstance(model, GPT):
        return torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))
    return torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("index", range(4))
def test_round_trip_rebuilds_the_same_model(tmp_path, index):
    model = _models()[index].eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))  # not the initial values
    folder = model.save_pretrained(tmp_path / "saved")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    config = json.loads((folder / "config.json").read_text())
    assert config["architecture"] == type(model).__name__
    loaded = type(model).from_pretrained(folder)
    assert not loaded.training
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for key, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value, rtol=0, atol=0)
    x = _input(model)
    torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)


def test_model_card_names_method_depth_and_epsilon(tmp_path):
    model = CaiT(**TINY, depth_token_only=1, init_value=3e-5)
    card = (model.save_pretrained(tmp_path) / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: torch-layerscale")
    assert "residual method: `layerscale`" in card
    assert "depth: 2 self-attention blocks + 1 class-attention blocks" in card
    assert "LayerScale ε (initial γ): 3e-05" in card
    metadata = card.split("---")[1]
    assert metadata.count("- layerscale") == 1  # residual="layerscale": one tag, not the same one twice
    assert "license" not in metadata  # the library's licence is not the licence of the user's weights
    card = (GPT(embed_dim=16, depth=3, num_heads=2, block_size=8, residual="prenorm").save_pretrained(
        tmp_path / "gpt") / "README.md").read_text()
    assert "residual method: `prenorm`" in card and "depth: 3 blocks" in card and "no LayerScale" in card
    assert "tags:\n- layerscale\n- prenorm\n---" in card


def test_reset_classifier_is_saved(tmp_path):
    model = VisionTransformer(**TINY)
    model.reset_classifier(0)
    loaded = VisionTransformer.from_pretrained(model.save_pretrained(tmp_path))
    assert loaded.num_classes == 0 and loaded(torch.randn(1, 3, 16, 16)).shape == (1, 16)


def test_refusals_are_one_line(tmp_path):
    vit = VisionTransformer(**TINY)
    folder = vit.save_pretrained(tmp_path / "vit")
    with pytest.raises(ValueError, match="describes a VisionTransformer, not a CaiT"):
        CaiT.from_pretrained(folder)
    changed = add_layerscale(VisionTransformer(**TINY, residual="prenorm"), 1.0)
    with pytest.raises(ValueError, match="changed after it was built"):
        changed.save_pretrained(tmp_path / "changed")
    assert not (tmp_path / "changed").exists()
    (folder / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors: missing"):
        VisionTransformer.from_pretrained(folder)
    with pytest.raises(FileNotFoundError, match="not a folder written by save_pretrained"):
        VisionTransformer.from_pretrained(tmp_path / "no" / "such" / "dir")


def test_hub_id_offline_fails_with_one_line(tmp_path):
    pytest.importorskip("huggingface_hub")
    code = ("from layerscale import VisionTransformer\n"
            "VisionTransformer.from_pretrained('someone/no-such-layerscale-model')\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("FileNotFoundError: someone/no-such-layerscale-model: not a local folder, and the "
                           "Hugging Face Hub repo could not be fetched")


@pytest.mark.parametrize("residual", __import__("layerscale").list_residuals())
def test_every_residual_method_round_trips(tmp_path, residual):
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    for cls in (VisionTransformer, CaiT):
        torch.manual_seed(0)
        model = cls(**TINY, residual=residual).eval()
        loaded = cls.from_pretrained(model.save_pretrained(tmp_path / cls.__name__))
        torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)
        assert f"residual method: `{residual}`" in (tmp_path / cls.__name__ / "README.md").read_text()


def test_create_model_pretrained_reads_a_saved_folder(tmp_path):
    torch.manual_seed(0)
    model = create_model("deit3_tiny_patch16_224", **TINY).eval()
    folder = model.save_pretrained(tmp_path / "saved")
    again = create_model("deit3_tiny_patch16_224", pretrained=True, pretrained_cfg_overlay=dict(file=str(folder)),
                         **TINY).eval()
    x = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(again(x), model(x), rtol=0, atol=0)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="a folder without model.safetensors"):
        create_model("vit", pretrained=True, pretrained_cfg_overlay=dict(file=str(tmp_path / "empty")))
