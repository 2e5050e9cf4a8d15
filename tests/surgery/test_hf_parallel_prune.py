"""``layerscale prune`` of the decoders whose attention and MLP read the same input — GPT-J, Phi, Cohere (2),
GPT-NeoX (Pythia), StableLM: the written folder computes the source with that layer skipped (a forward hook that
returns the layer's input, written independently of the block editor), Cohere 2's sliding-window ``layer_types``
following their layers, the KV cache right; ``grow`` refuses them in one line (no γ is retrofitted to them)."""

from __future__ import annotations

import pytest
import torch

from layerscale.cli import main

transformers = pytest.importorskip("transformers")

from source_models import decoder_layers, logits_skipping  # noqa: E402

AUTO = transformers.AutoModelForCausalLM
TEXT = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, vocab_size=64,
            max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=0)
FAMILIES = {
    "gptj": ("GPTJConfig", "GPTJForCausalLM", dict(n_embd=32, n_layer=3, n_head=4, n_positions=64, rotary_dim=4)),
    "phi": ("PhiConfig", "PhiForCausalLM", {}),
    "cohere": ("CohereConfig", "CohereForCausalLM", {}),
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM",
                dict(sliding_window=4, layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(use_parallel_residual=True)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(use_parallel_residual=True, num_key_value_heads=4)),
}
TOKENS = torch.randint(2, 60, (2, 12), generator=torch.Generator().manual_seed(1))


def _build(family):
    config_name, model_name, extra = FAMILIES[family]
    torch.manual_seed(0)
    return getattr(transformers, model_name)(getattr(transformers, config_name)(**TEXT, **extra)).eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_pruned_folder_is_the_source_with_that_layer_skipped(tmp_path, family):
    source = _build(family)
    source.save_pretrained(tmp_path / "source")
    out = tmp_path / "pruned"
    assert main(["prune", str(tmp_path / "source"), "--blocks", "1", "--out", str(out)]) == 0
    pruned, info = AUTO.from_pretrained(out, output_loading_info=True)
    assert type(pruned) is type(source) and not info["missing_keys"] and not info["unexpected_keys"]
    assert len(decoder_layers(pruned)) == 2 and pruned.config.num_hidden_layers == 2
    assert torch.equal(logits_skipping(pruned.eval(), TOKENS), logits_skipping(source, TOKENS, skip=1))
    if family == "cohere2":
        assert pruned.config.layer_types == ["sliding_attention", "sliding_attention"]
    cached = pruned.generate(TOKENS[:1], max_new_tokens=8, do_sample=False, use_cache=True)
    recomputed = pruned.generate(TOKENS[:1], max_new_tokens=8, do_sample=False, use_cache=False)
    assert torch.equal(cached, recomputed)


def test_grow_refuses_a_parallel_decoder_in_one_line_and_writes_nothing(tmp_path, capsys):
    _build("gpt_neox").save_pretrained(tmp_path / "source")
    capsys.readouterr()  # transformers' own save output
    out = tmp_path / "grown"
    assert main(["grow", str(tmp_path / "source"), "--insert", "1", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "GPTNeoXLayer" in error and "side by side" in error
    assert not out.exists()
