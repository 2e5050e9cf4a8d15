"""``layerscale fold`` of a timm model folder writes a timm folder that plain
``timm.create_model("local-dir:DEST", pretrained=True)`` loads (strictly) with the source's function: a ViT or
DeiT III without LayerScale modules (``init_values=0``), a CaiT with ``gamma_1 = gamma_2 = 1`` (timm always builds
them); the scales mattered (the same weights with every γ = 1 compute something else)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from layerscale.cli import main

timm = pytest.importorskip("timm")

from source_models import timm_folder  # noqa: E402

X = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(3))
SMALL = dict(img_size=8, patch_size=4, in_chans=1, num_classes=10, depth=3, embed_dim=32, num_heads=2)


def _random_gammas(model):
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("gamma", "gamma_1", "gamma_2")):
                param.uniform_(0.2, 1.5)
    return model.eval()


def _models():
    torch.manual_seed(0)
    return {"vit": _random_gammas(timm.create_model("vit_tiny_patch16_224", init_values=1e-2, **SMALL)),
            "deit3": _random_gammas(timm.create_model("deit3_small_patch16_224", **SMALL)),
            "cait": _random_gammas(timm.create_model("cait_xxs24_224", **SMALL))}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("timm_fold")
    return {name: (timm_folder(root / name, model), model) for name, model in _models().items()}


def _out(model, x=X):
    with torch.no_grad():
        return model.eval()(x)


def _gammas(model):
    return [(n, p) for n, p in model.named_parameters() if n.endswith(("gamma", "gamma_1", "gamma_2"))]


@pytest.mark.parametrize("name", ["vit", "deit3", "cait"])
def test_a_folded_timm_folder_loads_in_plain_timm_with_the_sources_function(folders, tmp_path, name):
    src, source = folders[name]
    out = tmp_path / "folded"
    assert main(["fold", str(src), str(out)]) == 0
    folded = timm.create_model(f"local-dir:{out}", pretrained=True)  # timm loads strictly: every key, no extra
    assert type(folded) is type(source)
    torch.testing.assert_close(_out(folded), _out(source), rtol=1e-5, atol=1e-5)
    if name == "cait":  # timm always builds gamma_1 / gamma_2: written as ones
        assert len(_gammas(folded)) == len(_gammas(source)) and all(bool((p == 1).all()) for _, p in _gammas(folded))
    else:
        assert not _gammas(folded)
        assert json.loads((out / "config.json").read_text())["model_args"]["init_values"] == 0
    unit = copy.deepcopy(source)
    with torch.no_grad():
        for _, p in _gammas(unit):
            p.fill_(1.0)
    assert (_out(unit) - _out(source)).abs().max() > 1e-3


def test_a_timm_folder_without_layerscale_is_refused_and_nothing_written(tmp_path, capsys):
    torch.manual_seed(0)
    src = timm_folder(tmp_path / "plain", timm.create_model("vit_tiny_patch16_224", **SMALL).eval())
    capsys.readouterr()
    assert main(["fold", str(src), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no LayerScale to fold" in err and "\n" not in err and not (tmp_path / "out").exists()


def test_a_safetensors_destination_for_a_folder_is_refused_in_one_line(folders, tmp_path, capsys):
    src, _ = folders["vit"]
    capsys.readouterr()
    assert main(["fold", str(src), str(tmp_path / "folded.safetensors")]) == 2
    err = capsys.readouterr().err.strip()
    assert "names a safetensors file" in err and "model.safetensors" in err and "\n" not in err
    assert not (tmp_path / "folded.safetensors").exists()


def test_the_weights_file_inside_a_timm_folder_still_folds_to_our_keys(folders, tmp_path, capsys):
    src, _ = folders["vit"]
    assert main(["fold", str(src / "model.safetensors"), str(tmp_path / "folded.safetensors")]) == 0
    assert "init_values=0" in capsys.readouterr().out and (tmp_path / "folded.safetensors").is_file()


@pytest.mark.parametrize("name", ["vit", "cait"])
def test_grow_fold_of_a_timm_folder_loads_in_plain_timm_with_the_sources_function(folders, tmp_path, name):
    src, source = folders[name]
    out = tmp_path / "grown"
    assert main(["grow", str(src), "--insert", "2", "--where", "top", "--fold", "--out", str(out)]) == 0
    grown = timm.create_model(f"local-dir:{out}", pretrained=True)
    assert len(grown.blocks) == 5
    torch.testing.assert_close(_out(grown), _out(source), rtol=1e-5, atol=1e-5)  # γ = 0 folded: zero projections
    assert torch.equal(grown.blocks[4].mlp.fc2.weight, torch.zeros_like(grown.blocks[4].mlp.fc2.weight))


def test_grow_fold_of_our_folder_is_refused_in_one_line(tmp_path, capsys):
    from layerscale import create_model

    ours = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=10, depth=2, embed_dim=32, num_heads=2)
    ours.save_pretrained(tmp_path / "ours")
    capsys.readouterr()
    assert main(["grow", str(tmp_path / "ours"), "--insert", "1", "--fold", "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--fold applies to Hugging Face and timm models" in err and "\n" not in err
    assert not (tmp_path / "g").exists()
