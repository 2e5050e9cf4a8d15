"""``layerscale prune``, ``grow`` and ``fold`` on Hugging Face image classifiers (a ViT given LayerScale by
``add_layerscale``, a DINOv2 with its own): each written folder loads through transformers' Auto class and computes
what the edit means, computed here on the source model by hand — the source with a layer deleted, the source itself
(new layers at γ = 0), the source's function without separate scales; the image processor travels with the model,
and a DINOv2 backbone's output stages stay valid at the new depth."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from layerscale import add_layerscale
from layerscale.cli import main

transformers = pytest.importorskip("transformers")
pytest.importorskip("sklearn")

import layerscale.integrations.hf_vision  # noqa: E402,F401  (registers vit_layerscale with the Auto classes)
from source_models import hf_dinov2, hf_vit  # noqa: E402

AUTO = transformers.AutoModelForImageClassification
X = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))


def _scaled_vit():
    model = add_layerscale(hf_vit(), 1.0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("layer_scale"):
                param.uniform_(0.2, 1.5)
    return model


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_vision")
    vit, dino = root / "vit", root / "dino"
    _scaled_vit().save_pretrained(vit)
    transformers.ViTImageProcessor(do_resize=False, image_mean=[0.3], image_std=[0.4]).save_pretrained(vit)
    hf_dinov2(out_indices=[1, 3]).save_pretrained(dino)
    return {"vit": vit, "dino": dino}


def _logits(model, x=X):
    with torch.no_grad():
        return model.eval()(pixel_values=x).logits


def _stack(model):
    return model.vit.layers if hasattr(model, "vit") else model.dinov2.encoder.layer


@pytest.mark.parametrize("name", ["vit", "dino"])
def test_a_pruned_folder_is_the_source_without_that_layer(folders, tmp_path, name):
    out = tmp_path / "pruned"
    assert main(["prune", str(folders[name]), "--blocks", "1", "--data", "digits", "--examples", "30",
                 "--out", str(out)]) == 0
    source = AUTO.from_pretrained(folders[name])
    expected = copy.deepcopy(source)
    del _stack(expected)[1]
    pruned = AUTO.from_pretrained(out)
    assert pruned.config.num_hidden_layers == 2 and len(_stack(pruned)) == 2
    assert torch.equal(_logits(pruned), _logits(expected))
    if name == "vit":
        assert (out / "preprocessor_config.json").read_bytes() == (folders[name] / "preprocessor_config.json"
                                                                  ).read_bytes()
    else:  # the backbone's output stages: stage1 kept, the old last stage (3) is the new last stage (2)
        assert pruned.config.out_indices == [1, 2] and pruned.config.stage_names == ["stem", "stage1", "stage2"]


@pytest.mark.parametrize("name", ["vit", "dino"])
def test_a_grown_folder_computes_the_sources_function(folders, tmp_path, name):
    out = tmp_path / "grown"
    assert main(["grow", str(folders[name]), "--insert", "2", "--out", str(out)]) == 0
    grown = AUTO.from_pretrained(out)
    assert len(_stack(grown)) == 5 and grown.config.num_hidden_layers == 5
    assert torch.equal(_logits(grown), _logits(AUTO.from_pretrained(folders[name])))


@pytest.mark.parametrize("name", ["vit", "dino"])
def test_fold_writes_a_folder_plain_from_pretrained_loads_with_the_sources_function(folders, tmp_path, name):
    out = tmp_path / "folded"
    assert main(["fold", str(folders[name]), str(out)]) == 0
    model_type = json.loads((out / "config.json").read_text())["model_type"]
    assert model_type == {"vit": "vit", "dino": "dinov2"}[name]  # no _layerscale mark: the plain class loads it
    plain_class = {"vit": transformers.ViTForImageClassification,
                   "dino": transformers.Dinov2ForImageClassification}[name]
    folded, info = plain_class.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]  # DINOv2 keeps lambda1 = 1: nothing re-drawn
    assert not any(n.endswith("layer_scale") for n, _ in folded.named_parameters())
    if name == "dino":
        assert all(bool((p == 1).all()) for n, p in folded.named_parameters() if n.endswith("lambda1"))
    source = AUTO.from_pretrained(folders[name])
    torch.testing.assert_close(_logits(folded), _logits(source), rtol=1e-5, atol=1e-5)
    unit = copy.deepcopy(source)  # the same weights with every γ = 1: the scales matter to the function
    with torch.no_grad():
        for n, p in unit.named_parameters():
            if n.endswith(("layer_scale", "lambda1")):
                p.fill_(1.0)
    assert (_logits(unit) - _logits(source)).abs().max() > 1e-3


def test_fold_of_a_folder_without_layerscale_is_refused_and_writes_nothing(tmp_path, capsys):
    hf_vit().save_pretrained(tmp_path / "plain")
    capsys.readouterr()
    assert main(["fold", str(tmp_path / "plain"), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no LayerScale to fold" in err and "\n" not in err and not (tmp_path / "out").exists()
