"""``layerscale prune``, ``grow`` and ``fold`` on Hugging Face DeiT image classifiers (with and without the
distillation head), given LayerScale by ``add_layerscale`` (DeiT's layer is ViT's layout): each written folder loads
with ``from_pretrained_with_layerscale`` (or, folded, plain ``from_pretrained``) into the source's class and computes
what the edit means, computed here on the source model by hand."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from layerscale import add_layerscale
from layerscale.cli import main

transformers = pytest.importorskip("transformers")
pytest.importorskip("sklearn")

from layerscale.integrations.hf_vision import from_pretrained_with_layerscale  # noqa: E402
from source_models import hf_deit  # noqa: E402

AUTO = transformers.AutoModelForImageClassification
X = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(2))
CLASSES = {False: "DeiTForImageClassification", True: "DeiTForImageClassificationWithTeacher"}


@pytest.fixture(scope="module", params=[False, True], ids=["deit", "deit_teacher"])
def folder(request, tmp_path_factory):
    model = add_layerscale(hf_deit(teacher=request.param), 1.0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("layer_scale"):
                param.uniform_(0.2, 1.5)
    path = tmp_path_factory.mktemp("deit") / "model"
    model.save_pretrained(path)
    return path, request.param


def _load(path):
    return from_pretrained_with_layerscale(AUTO, path).eval()


def _logits(model):
    with torch.no_grad():
        return model.eval()(pixel_values=X).logits


def test_add_layerscale_scales_both_branches_of_every_deit_layer():
    model = add_layerscale(hf_deit(), 1e-5)
    scales = [n for n, _ in model.named_parameters() if n.endswith("layer_scale")]
    assert len(scales) == 2 * 3 and all(n.startswith("deit.layers.") for n in scales)


def test_a_pruned_folder_is_the_source_without_that_layer(folder, tmp_path):
    path, teacher = folder
    out = tmp_path / "pruned"
    assert main(["prune", str(path), "--blocks", "1", "--data", "digits", "--examples", "30", "--out", str(out)]) == 0
    expected = _load(path)
    del expected.deit.layers[1]
    pruned = _load(out)
    assert type(pruned).__name__ == CLASSES[teacher]
    assert pruned.config.num_hidden_layers == 2 and len(pruned.deit.layers) == 2
    assert torch.equal(_logits(pruned), _logits(expected))


def test_a_grown_folder_computes_the_sources_function(folder, tmp_path):
    path, _ = folder
    out = tmp_path / "grown"
    assert main(["grow", str(path), "--insert", "2", "--out", str(out)]) == 0
    grown = _load(out)
    assert len(grown.deit.layers) == 5 and grown.config.num_hidden_layers == 5
    assert torch.equal(_logits(grown), _logits(_load(path)))


def test_fold_writes_a_folder_the_plain_class_loads_with_the_sources_function(folder, tmp_path):
    path, teacher = folder
    out = tmp_path / "folded"
    assert main(["fold", str(path), str(out)]) == 0
    folded, info = AUTO.from_pretrained(out, output_loading_info=True)  # plain transformers, by the saved class
    assert type(folded).__name__ == CLASSES[teacher]
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not any(n.endswith("layer_scale") for n, _ in folded.named_parameters())
    source = _load(path)
    torch.testing.assert_close(_logits(folded), _logits(source), rtol=1e-5, atol=1e-5)
    unit = copy.deepcopy(source)  # every γ = 1: the scales matter to the function
    with torch.no_grad():
        for n, p in unit.named_parameters():
            if n.endswith("layer_scale"):
                p.fill_(1.0)
    assert (_logits(unit) - _logits(source)).abs().max() > 1e-3


def test_auto_image_classification_refuses_a_marked_deit_folder_rather_than_guess_its_head(folder):
    path, _ = folder
    with pytest.raises(ValueError, match="Unrecognized configuration class"):
        AUTO.from_pretrained(path)


def test_a_marked_deit_folder_names_the_vision_loader(folder):
    path, teacher = folder
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "deit_layerscale"
    assert config["layerscale_loader"] == "layerscale.integrations.hf_vision.from_pretrained_with_layerscale"
    with pytest.raises(Exception, match=r"a plain DeiT would drop, computing another function; load it with "
                                        r"layerscale\.integrations\.hf_vision\.from_pretrained_with_layerscale\("
                                        r"AutoModelForImageClassification, folder\)"):
        getattr(transformers, CLASSES[teacher]).from_pretrained(path)


def test_prune_heals_a_deit_and_writes_a_folder_that_loads(folder, tmp_path, capsys):
    path, teacher = folder
    plain, healed = tmp_path / "plain", tmp_path / "healed"
    assert main(["prune", str(path), "--blocks", "1", "--out", str(plain)]) == 0
    assert main(["prune", str(path), "--blocks", "1", "--data", "digits", "--examples", "32", "--heal-steps", "3",
                 "--heal", "full", "--heal-lr", "1e-2", "--heal-batch-size", "8", "--out", str(healed)]) == 0
    assert "healed 3 steps" in capsys.readouterr().out
    before, after = _load(plain), _load(healed)
    assert type(after).__name__ == CLASSES[teacher] and len(after.deit.layers) == 2
    assert before.state_dict().keys() == after.state_dict().keys()
    assert any(not torch.equal(v, after.state_dict()[k]) for k, v in before.state_dict().items())
