"""One table (surgery.hf.hf_layerscale_config.MARKED_FAMILIES) says which transformers Auto class reads which marked
folder: every family add_layerscale retrofits is in it, the integration modules register exactly what it lists, and a
concrete class's refusal names the loader the table implies."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

import layerscale.integrations.hf_causal_lm  # noqa: E402,F401  (importing registers)
import layerscale.integrations.hf_vision  # noqa: E402,F401
from layerscale.surgery.hf.hf_decoder_layers import HF_DECODER_LAYERS  # noqa: E402
from layerscale.surgery.hf.hf_layerscale_config import (MARKED_FAMILIES, families_registered_by,  # noqa: E402
                                                        loader_of, marked_config_class)
from layerscale.surgery.hf.hf_vit_layers import HF_VIT_LAYERS  # noqa: E402


def _model_type(module: str) -> str:
    """``transformers.models.qwen3.modeling_qwen3`` → ``qwen3``."""
    return module.split(".")[2]


def test_every_retrofitted_family_has_a_marked_type_and_one_integration_module():
    retrofitted = {_model_type(m) for m in (*HF_DECODER_LAYERS, *HF_VIT_LAYERS)}
    assert retrofitted == set(MARKED_FAMILIES)
    modules = {module for module, _, _ in MARKED_FAMILIES.values()}
    assert modules == {"layerscale.integrations.hf_causal_lm", "layerscale.integrations.hf_vision"}
    split = [families_registered_by(module) for module in sorted(modules)]
    assert sum(len(part) for part in split) == len(MARKED_FAMILIES)


@pytest.mark.parametrize("model_type", sorted(MARKED_FAMILIES))
def test_the_auto_classes_know_the_marked_type_exactly_as_the_table_lists(model_type):
    module, config_name, models = MARKED_FAMILIES[model_type]
    marked = marked_config_class(getattr(transformers, config_name))
    assert transformers.AutoConfig.for_model(marked.model_type).__class__ is marked
    listed = {auto for auto, _ in models}
    for auto_name in ("AutoModel", "AutoModelForCausalLM", "AutoModelForImageClassification"):
        mapping = getattr(transformers, auto_name)._model_mapping
        registered = marked in mapping
        assert registered == (auto_name in listed), (model_type, auto_name)
        if registered:
            model_name = dict(models)[auto_name]
            assert mapping[marked].__name__ == f"LayerScale{model_name}"
            assert mapping[marked].__module__ == module


def test_the_refusal_names_the_loader_of_the_task_class():
    assert loader_of("llama") == ("AutoModelForCausalLM", "layerscale.integrations.hf_causal_lm",
                                  "layerscale.integrations.hf_causal_lm.from_pretrained_with_layerscale")
    assert loader_of("deit")[:2] == ("AutoModelForImageClassification", "layerscale.integrations.hf_vision")
    assert loader_of("not_a_listed_type")[0] == "AutoModelForCausalLM"  # a type not listed is a causal LM
