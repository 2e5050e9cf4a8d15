"""Depth surgery on the decoders whose branches are named otherwise than Llama's: those whose attention and MLP read the
same input — GPT-J, Phi, Cohere (2), GPT-NeoX (Pythia), StableLM, Falcon (7B's, 40B's new architecture; Falcon-RW's
sequential layers with ALiBi too) — and OPT and BLOOM. ``layerscale prune``: the written folder computes the source with
that layer skipped (a forward hook that returns the layer's input, written independently of the block editor), Cohere
2's sliding-window ``layer_types`` following their layers, the KV cache right. ``add_layerscale``: γ on each branch's
last linear, exact at 1, the identity at 0. ``grow`` (γ = 0: the source's function, read back through the marked type)
and ``fold`` (a plain folder with the scaled model's function). A configuration that is not a residual stack (OPT-350m's
Post-LN, BLOOM computing its outputs from weight slices) takes no γ: refused in one line, nothing written; its layers
can still be pruned."""

from __future__ import annotations

import pytest
import torch

from layerscale import add_layerscale
from layerscale.cli import main
from layerscale.diagnostics import find_blocks
from layerscale.surgery import LayerScaledLinear

transformers = pytest.importorskip("transformers")

import layerscale.integrations.hf_causal_lm  # noqa: E402,F401  (registers the marked types with the Auto class)
from source_models import assert_pruned_skips_layer, decoder_layers, logits_skipping  # noqa: E402

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
    "opt": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=48, word_embed_proj_dim=32)),
    "bloom": ("BloomConfig", "BloomForCausalLM", dict(n_layer=3, n_head=4)),
    "falcon": ("FalconConfig", "FalconForCausalLM", dict(ffn_hidden_size=48)),
    "falcon_new_architecture": ("FalconConfig", "FalconForCausalLM", dict(ffn_hidden_size=48,
                                                                          new_decoder_architecture=True,
                                                                          num_kv_heads=2)),
    "falcon_sequential": ("FalconConfig", "FalconForCausalLM", dict(ffn_hidden_size=48, parallel_attn=False,
                                                                    alibi=True)),
    "mpt": ("MptConfig", "MptForCausalLM", dict(d_model=32, n_heads=4, n_layers=3)),
}
NOT_A_RESIDUAL_STACK = {
    "opt_post_ln": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=48, word_embed_proj_dim=32, do_layer_norm_before=False)),
    "bloom_sliced": ("BloomConfig", "BloomForCausalLM", dict(n_layer=3, n_head=4, pretraining_tp=2,
                                                             slow_but_exact=True)),
}
TOKENS = torch.randint(2, 60, (2, 12), generator=torch.Generator().manual_seed(1))


def _build(family):
    config_name, model_name, extra = {**FAMILIES, **NOT_A_RESIDUAL_STACK}[family]
    torch.manual_seed(0)
    return getattr(transformers, model_name)(getattr(transformers, config_name)(**TEXT, **extra)).eval()


@pytest.mark.parametrize("family", [*FAMILIES, *NOT_A_RESIDUAL_STACK])
def test_a_pruned_folder_is_the_source_with_that_layer_skipped(tmp_path, family):
    pruned = assert_pruned_skips_layer(_build(family), tmp_path, main, TOKENS)
    if family == "cohere2":
        assert pruned.config.layer_types == ["sliding_attention", "sliding_attention"]


OUTPUTS = {"gptj": ("attn.out_proj", "mlp.fc_out"), "phi": ("self_attn.dense", "mlp.fc2"),
           "gpt_neox": ("attention.dense", "mlp.dense_4h_to_h"), "opt": ("self_attn.out_proj", "fc2"),
           "bloom": ("self_attention.dense", "mlp.dense_4h_to_h"),
           **dict.fromkeys(("falcon", "falcon_new_architecture", "falcon_sequential"),
                           ("self_attention.dense", "mlp.dense_4h_to_h")),
           "mpt": ("attn.out_proj", "ffn.down_proj")}  # the others: Llama's o_proj / down_proj


@pytest.mark.parametrize("family", FAMILIES)
def test_add_layerscale_scales_each_branchs_last_linear_and_is_exact_at_one(family):
    model = _build(family)
    before = logits_skipping(model, TOKENS)
    add_layerscale(model, 1.0)
    assert torch.equal(logits_skipping(model, TOKENS), before)
    attn, mlp = OUTPUTS.get(family, ("self_attn.o_proj", "mlp.down_proj"))
    for layer in decoder_layers(model):
        assert isinstance(layer.get_submodule(attn), LayerScaledLinear)
        assert isinstance(layer.get_submodule(mlp), LayerScaledLinear)
    assert sum(name.endswith("layer_scale") for name, _ in model.named_parameters()) == 2 * 3
    probes = find_blocks(model)  # the diagnostics read each branch's γ where add_layerscale put it
    assert [branch.scale is layer.get_submodule(path).layer_scale for probe, layer in zip(probes, decoder_layers(model))
            for branch, path in zip(probe.branches, (attn, mlp))] == [True] * 6
    # γ = 0 on one layer's branches makes it the identity: each branch's term is scaled, both terms
    with torch.no_grad():
        layer = decoder_layers(model)[1]
        layer.get_submodule(attn).layer_scale.zero_()
        layer.get_submodule(mlp).layer_scale.zero_()
    assert torch.equal(logits_skipping(model, TOKENS), logits_skipping(_build(family), TOKENS, skip=1))


@pytest.mark.parametrize("family", ["gpt_neox", "phi", "gptj", "opt", "bloom", "falcon", "falcon_sequential",
                                    "mpt"])
def test_grow_fold_and_the_marked_type_from_the_command_line(tmp_path, family):
    source = _build(family)
    source.save_pretrained(tmp_path / "source")
    grown_folder = tmp_path / "grown"
    assert main(["grow", str(tmp_path / "source"), "--insert", "1", "--where", "after:1", "--out",
                 str(grown_folder)]) == 0
    grown = AUTO.from_pretrained(grown_folder)  # the marked type, registered by the integration's import
    assert type(grown).__name__.startswith("LayerScale") and len(decoder_layers(grown)) == 4
    assert torch.equal(logits_skipping(grown.eval(), TOKENS), logits_skipping(source, TOKENS))
    with torch.no_grad():  # the new block moved off the identity, so that folding has something to keep
        for name, param in grown.named_parameters():
            if name.endswith("layer_scale"):
                param.uniform_(0.2, 1.5)
    grown.save_pretrained(tmp_path / "trained")
    assert main(["fold", str(tmp_path / "trained"), str(tmp_path / "folded")]) == 0
    folded, info = AUTO.from_pretrained(tmp_path / "folded", output_loading_info=True)
    assert type(folded) is type(source) and not info["missing_keys"] and not info["unexpected_keys"]
    torch.testing.assert_close(logits_skipping(folded.eval(), TOKENS), logits_skipping(grown, TOKENS), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("family, reason", [("opt_post_ln", "do_layer_norm_before=False"),
                                            ("bloom_sliced", "slow_but_exact=True")])
def test_a_layer_that_is_not_a_residual_stack_takes_no_gamma(tmp_path, capsys, family, reason):
    model = _build(family)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    with pytest.raises(ValueError, match=reason) as caught:
        add_layerscale(model, 1.0)
    assert "\n" not in str(caught.value)
    assert model.state_dict().keys() == before.keys() and type(model.config) is type(_build(family).config)
    model.save_pretrained(tmp_path / "source")
    capsys.readouterr()
    out = tmp_path / "grown"
    assert main(["grow", str(tmp_path / "source"), "--insert", "1", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and reason in error
    assert not out.exists()
