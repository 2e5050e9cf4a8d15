"""``layerscale fold`` of a Hugging Face language-model folder holding γ (``add_layerscale`` on a Llama, saved):
the folder it writes loads with plain ``AutoModelForCausalLM.from_pretrained`` (no ``_layerscale`` mark, no scale
key) and computes the source's function; its tokenizer travels with it."""

from __future__ import annotations

import json

import pytest
import torch

from layerscale import add_layerscale
from layerscale.cli import main

transformers = pytest.importorskip("transformers")

from source_models import llama  # noqa: E402


def test_a_folded_language_model_folder_loads_plainly_with_the_sources_function(tmp_path):
    from layerscale.integrations.hf_causal_lm import from_pretrained_with_layerscale

    model = add_layerscale(llama(64, layers=2), 1.0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("layer_scale"):
                param.uniform_(0.2, 1.5)
    model.save_pretrained(tmp_path / "scaled")
    (tmp_path / "scaled" / "tokenizer_config.json").write_text("{}")
    assert main(["fold", str(tmp_path / "scaled"), str(tmp_path / "folded")]) == 0
    assert json.loads((tmp_path / "folded" / "config.json").read_text())["model_type"] == "llama"
    assert (tmp_path / "folded" / "tokenizer_config.json").read_text() == "{}"
    folded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "folded").eval()
    assert not any(name.endswith("layer_scale") for name, _ in folded.named_parameters())
    source = from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path / "scaled").eval()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(folded(ids).logits, source(ids).logits, rtol=1e-5, atol=1e-5)
