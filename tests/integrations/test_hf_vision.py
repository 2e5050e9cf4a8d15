"""A Hugging Face ViT saved after add_layerscale: marked (model type ``vit_layerscale``) so that no transformers loader
builds it without γ; read back exactly by transformers' Auto classes once layerscale.integrations.hf_vision is
imported, and by from_pretrained_with_layerscale; refused by the concrete classes; folded, an ordinary folder again.

Before the mark, ``ViTForImageClassification.from_pretrained`` read such a folder without γ and without an error
(another function: logits 0.05 apart on the model below), and from_pretrained_with_layerscale refused it, comparing
the in-memory names (``vit.layers.0.attention.o_proj.layer_scale``) with the saved ones
(``vit.encoder.layer.0.attention.output.dense.layer_scale``)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from layerscale import add_layerscale, fold_layerscale  # noqa: E402
from layerscale.integrations.hf_vision import from_pretrained_with_layerscale  # noqa: E402
from layerscale.surgery.hf.hf_layerscale_config import guard_field  # noqa: E402

GUARD_KEYS = {"layerscale_loader", "layerscale_plain_load_guard"}


def _config():
    return transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                  image_size=16, patch_size=4, num_labels=3)


def _randomized(model):
    """Every parameter drawn again (γ in [0.5, 1.5]), so a tensor loaded into the wrong place would show."""
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            values = torch.rand(p.shape, generator=generator)
            p.copy_(0.5 + values if name.endswith(".layer_scale") else 0.2 * (values - 0.5))
    return model.eval()


def _images():
    return torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))


def _saved(tmp_path, cls=None):
    model = _randomized(add_layerscale((cls or transformers.ViTForImageClassification)(_config()), init_value=1e-5))
    model.save_pretrained(tmp_path)
    return model


def _output(model, x):
    with torch.no_grad():
        out = model(pixel_values=x)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def test_the_saved_config_is_marked_and_the_scales_are_saved_under_transformers_names(tmp_path):
    from safetensors import safe_open

    from layerscale.surgery.hf.loaded_as_saved import as_checkpoint_names

    model = _saved(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "vit_layerscale" and GUARD_KEYS <= set(config)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as handle:
        saved = {k for k in handle.keys() if k.endswith(".layer_scale")}
    own = {n: p for n, p in model.named_parameters() if n.endswith(".layer_scale")}
    assert saved == set(as_checkpoint_names(model, own)) and len(saved) == 4
    assert "vit.encoder.layer.0.attention.output.dense.layer_scale" in saved  # not the in-memory name


@pytest.mark.parametrize("cls", ["ViTForImageClassification", "ViTModel"])
def test_a_concrete_class_refuses_the_folder_before_reading_a_weight(tmp_path, cls):
    _saved(tmp_path)
    with pytest.raises(Exception, match=r"holds LayerScale scales \(keys \*\.layer_scale\) that a plain ViT would "
                                        r"drop.*AutoModelForImageClassification.*layerscale\.integrations\.hf_vision"
                       ) as refused:
        getattr(transformers, cls).from_pretrained(tmp_path)
    assert type(refused.value).__name__ == "StrictDataclassFieldValidationError"


def test_without_the_library_transformers_refuses_the_folder(tmp_path):
    _saved(tmp_path)
    script = ("import sys, transformers\ntry:\n    transformers.AutoModelForImageClassification.from_pretrained("
              "sys.argv[1])\nexcept ValueError as e:\n    print('refused', 'vit_layerscale' in str(e))\n"
              "print('layerscale' in ' '.join(sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["refused", "True", "False"], done.stderr[-2000:]


def test_transformers_auto_classes_read_the_folder_exactly(tmp_path):
    model = _saved(tmp_path)
    x = _images()
    loaded = transformers.AutoModelForImageClassification.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "LayerScaleViTForImageClassification"
    assert isinstance(loaded, transformers.ViTForImageClassification)
    for name, param in model.named_parameters():
        torch.testing.assert_close(loaded.get_parameter(name), param, rtol=0, atol=0)
    torch.testing.assert_close(_output(loaded, x), _output(model, x), rtol=0, atol=0)
    again = pickle.loads(pickle.dumps(loaded))
    torch.testing.assert_close(_output(again, x), _output(model, x), rtol=0, atol=0)
    built = transformers.AutoModelForImageClassification.from_config(loaded.config)  # γ when built, too
    assert {n for n, _ in built.named_parameters()} == {n for n, _ in model.named_parameters()}


def test_auto_model_reads_a_saved_backbone_exactly(tmp_path):
    model = _saved(tmp_path, transformers.ViTModel)
    loaded = transformers.AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "LayerScaleViTModel"
    x = _images()
    torch.testing.assert_close(_output(loaded, x), _output(model, x), rtol=0, atol=0)


def test_from_pretrained_with_layerscale_reads_the_folder_exactly_and_folding_unmarks_it(tmp_path):
    model = _saved(tmp_path / "scaled")
    x = _images()
    loaded = from_pretrained_with_layerscale(transformers.ViTForImageClassification, tmp_path / "scaled")
    assert type(loaded) is transformers.ViTForImageClassification and loaded.config.model_type == "vit_layerscale"
    torch.testing.assert_close(_output(loaded, x), _output(model, x), rtol=0, atol=0)
    fold_layerscale(loaded)
    assert loaded.config.model_type == "vit" and not GUARD_KEYS & set(loaded.config.to_dict())
    loaded.save_pretrained(tmp_path / "folded")
    plain = transformers.ViTForImageClassification.from_pretrained(tmp_path / "folded").eval()
    torch.testing.assert_close(_output(plain, x), _output(model, x), rtol=1e-5, atol=1e-5)


def test_the_guard_field_is_an_int_field_of_the_config():
    assert guard_field(transformers.ViTConfig) == "hidden_size"
    assert guard_field(transformers.LlamaConfig) == "vocab_size"

    @dataclasses.dataclass
    class NoSizes:
        name: str = ""

    with pytest.raises(ValueError, match="NoSizes declares none of vocab_size, hidden_size, num_hidden_layers"):
        guard_field(NoSizes)
