"""The Llama-layout decoder families beyond Llama / Mistral / Qwen2 (Qwen3, Phi-3, Gemma, OLMo, Granite, SmolLM3):
``add_layerscale`` at γ = 1 computes the model exactly; ``layerscale prune`` writes a folder that is the source with
that layer deleted by hand (the per-layer config lists, Qwen3's sliding-window ``layer_types`` and SmolLM3's
``no_rope_layers``, follow their layers); ``grow`` at γ = 0 is the source; ``fold`` of a scaled folder loads in plain
``AutoModelForCausalLM`` with the source's function; the marked type loads through the Auto class."""

from __future__ import annotations

import copy

import pytest
import torch

from layerscale import add_layerscale
from layerscale.cli import main

transformers = pytest.importorskip("transformers")

from layerscale.integrations.hf_causal_lm import from_pretrained_with_layerscale  # noqa: E402

VOCAB = 64
BASE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=VOCAB, max_position_embeddings=32, bos_token_id=0, eos_token_id=1, pad_token_id=0)
FAMILIES = {  # per family: the options that give its layers something to get wrong when moved
    "qwen3": ("Qwen3", dict(head_dim=8, use_sliding_window=True, sliding_window=4,
                            layer_types=["full_attention", "sliding_attention", "full_attention"])),
    "phi3": ("Phi3", {}),
    "gemma": ("Gemma", dict(head_dim=8)),
    "olmo": ("Olmo", {}),
    "granite": ("Granite", dict(residual_multiplier=0.5, embedding_multiplier=2.0)),
    "smollm3": ("SmolLM3", dict(no_rope_layers=[1, 0, 1])),
}
AUTO = transformers.AutoModelForCausalLM
TOKENS = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))


def _build(family):
    prefix, extra = FAMILIES[family]
    torch.manual_seed(0)
    config = getattr(transformers, f"{prefix}Config")(**BASE, **extra)
    return getattr(transformers, f"{prefix}ForCausalLM")(config).eval()


def _logits(model):
    with torch.no_grad():
        return model.eval()(TOKENS, use_cache=False).logits


def _layers(model):
    return model.model.layers


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("llama_layout")
    made = {}
    for family in FAMILIES:
        plain = _build(family)
        plain.save_pretrained(root / family)
        scaled = add_layerscale(copy.deepcopy(plain), 1.0)
        with torch.no_grad():
            for name, param in scaled.named_parameters():
                if name.endswith("layer_scale"):
                    param.uniform_(0.2, 1.5)
        scaled.save_pretrained(root / f"{family}-scaled")
        made[family] = (root / family, root / f"{family}-scaled")
    return made


@pytest.mark.parametrize("family", FAMILIES)
def test_add_layerscale_at_one_is_exact_and_scales_both_branches(family):
    model = _build(family)
    before = _logits(model)
    add_layerscale(model, 1.0)
    assert torch.equal(_logits(model), before)
    scales = [n for n, _ in model.named_parameters() if n.endswith("layer_scale")]
    assert len(scales) == 2 * 3 and {n.split(".")[-2] for n in scales} == {"o_proj", "down_proj"}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_pruned_folder_is_the_source_without_that_layer(folders, tmp_path, family):
    source, _ = folders[family]
    out = tmp_path / "pruned"
    assert main(["prune", str(source), "--blocks", "1", "--out", str(out)]) == 0
    expected = AUTO.from_pretrained(source)
    del _layers(expected)[1]  # and its entry of each per-layer list (Qwen3's forward reads layer_types by position)
    for key in ("layer_types", "no_rope_layers"):
        if getattr(expected.config, key, None) is not None:
            setattr(expected.config, key, [v for i, v in enumerate(getattr(expected.config, key)) if i != 1])
    expected.config.num_hidden_layers = 2
    pruned = from_pretrained_with_layerscale(AUTO, out)
    assert len(_layers(pruned)) == 2 and pruned.config.num_hidden_layers == 2
    assert torch.equal(_logits(pruned), _logits(expected))
    assert [layer.self_attn.layer_idx for layer in _layers(pruned)] == [0, 1]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_grown_folder_computes_the_sources_function(folders, tmp_path, family):
    source, _ = folders[family]
    out = tmp_path / "grown"
    assert main(["grow", str(source), "--insert", "2", "--out", str(out)]) == 0
    grown = from_pretrained_with_layerscale(AUTO, out)
    assert len(_layers(grown)) == 5
    assert torch.equal(_logits(grown), _logits(AUTO.from_pretrained(source)))


@pytest.mark.parametrize("family", FAMILIES)
def test_fold_of_a_scaled_folder_loads_in_plain_transformers(folders, tmp_path, family):
    _, scaled = folders[family]
    out = tmp_path / "folded"
    assert main(["fold", str(scaled), str(out)]) == 0
    folded, info = AUTO.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    source = AUTO.from_pretrained(scaled)  # the marked type, registered by the integration's import
    assert type(source).__name__.startswith("LayerScale")
    torch.testing.assert_close(_logits(folded), _logits(source), rtol=1e-5, atol=1e-5)
    unit = copy.deepcopy(source)
    with torch.no_grad():
        for name, param in unit.named_parameters():
            if name.endswith("layer_scale"):
                param.fill_(1.0)
    assert (_logits(unit) - _logits(source)).abs().max() > 1e-3


@pytest.mark.parametrize("family", ["qwen3", "smollm3"])
def test_prune_heals_on_text_and_writes_a_folder_that_loads(tmp_path, capsys, family):
    pytest.importorskip("tokenizers")
    from source_models import assert_healing_moves_weights, text_source

    prefix, extra = FAMILIES[family]

    def build(vocab):
        torch.manual_seed(0)
        config = getattr(transformers, f"{prefix}Config")(**{**BASE, "vocab_size": vocab}, **extra)
        return getattr(transformers, f"{prefix}ForCausalLM")(config).eval()

    source, corpus = text_source(tmp_path, build)
    assert_healing_moves_weights(source, corpus, tmp_path, main, capsys)
