"""``layerscale prune`` and ``grow`` of the post-norm ("sandwich") decoders — Gemma 2, Gemma 3, OLMo 2 / 3, EXAONE
4 — whose branches end in a norm: the written folder computes the source with that layer skipped (a forward hook that returns
the layer's input, written independently of the block editor), with the sliding-window ``layer_types`` following
their layers and the KV cache right; ``--by gromov`` and healing on text; ``--by gamma`` refused in one line. Grown,
a new block's branch scale is its post-norms' gain: at 0 the folder (plain transformers) computes the source, at
``G`` each branch adds ``G ⊙ n(F)``. (Gemma 3's image-text model: tests/surgery/test_hf_image_text_depth.py.)"""

from __future__ import annotations

import re

import pytest
import torch

from layerscale.cli import main

transformers = pytest.importorskip("transformers")

from source_models import (assert_healing_moves_weights, assert_pruned_skips_layer, decoder_layers,  # noqa: E402
                           hf_loss, hf_windows, logits_skipping, text_source)

AUTO = transformers.AutoModelForCausalLM
VOCAB = 64
LAYER_TYPES = ["sliding_attention", "full_attention", "sliding_attention"]  # skipping layer 1 moves the others
TEXT = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=0)
SLIDING = dict(sliding_window=4, layer_types=LAYER_TYPES)
FAMILIES = {
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(head_dim=8, **SLIDING)),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(head_dim=8, **SLIDING)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", SLIDING),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", dict(head_dim=8, **SLIDING)),
}
TOKENS = torch.randint(2, 60, (2, 12), generator=torch.Generator().manual_seed(1))


def _build(family, vocab=VOCAB):
    config_name, model_name, extra = FAMILIES[family]
    torch.manual_seed(0)
    return getattr(transformers, model_name)(getattr(transformers, config_name)(**{**TEXT, "vocab_size": vocab},
                                                                               **extra)).eval()


def _logits(model, skip=None):
    return logits_skipping(model, TOKENS, skip)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_pruned_folder_is_the_source_with_that_layer_skipped(tmp_path, family):
    # the KV cache checked too: sliding-window layers included (20 tokens > the window of 4)
    pruned = assert_pruned_skips_layer(_build(family), tmp_path, main, TOKENS)
    if "layer_types" in FAMILIES[family][2]:
        assert pruned.config.layer_types == ["sliding_attention", "sliding_attention"]
    assert [layer.self_attn.layer_idx for layer in decoder_layers(pruned)] == [0, 1]


@pytest.mark.parametrize("family", ["gemma2", "olmo3"])
def test_a_grown_folder_is_plain_and_computes_the_source(tmp_path, capsys, family):
    source = _build(family)
    source.save_pretrained(tmp_path / "source")
    out = tmp_path / "grown"
    assert main(["grow", str(tmp_path / "source"), "--insert", "2", "--where", "after:0,2", "--out", str(out)]) == 0
    grown, info = AUTO.from_pretrained(out, output_loading_info=True)  # plain transformers: no marked type
    assert type(grown) is type(source) and not info["missing_keys"] and not info["unexpected_keys"]
    assert not [name for name, _ in grown.named_parameters() if "layer_scale" in name]
    assert torch.equal(_logits(grown.eval()), _logits(source))
    assert grown.config.layer_types == ["sliding_attention", "sliding_attention", "full_attention",
                                        "sliding_attention", "sliding_attention"]  # a copy takes its origin's type
    assert [layer.self_attn.layer_idx for layer in decoder_layers(grown)] == [0, 1, 2, 3, 4]
    capsys.readouterr()
    assert main(["grow", str(tmp_path / "source"), "--insert", "1", "--fold", "--out", str(tmp_path / "f")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "no LayerScale γ to fold" in error and "plain already" in error
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("family", ["gemma2", "olmo2"])  # gain 1 + weight, and gain weight
def test_a_new_blocks_branches_are_scaled_by_gamma(family):
    """At ``--gamma G`` each branch of a new block adds ``G ⊙ n(F)``: its post-norm's output is ``G`` times the
    input's RMS normalisation (computed here in float64)."""
    from layerscale.surgery import grow

    gamma = 0.375
    grown = grow(_build(family), insert=1, where="after:0", gamma=gamma)
    new = decoder_layers(grown)[1]
    seen = {}
    for name in ("post_attention_layernorm", "post_feedforward_layernorm"):
        getattr(new, name).register_forward_hook(lambda m, a, o, name=name: seen.__setitem__(name, (a[0], o)))
    _logits(grown)
    for name, (branch, scaled) in seen.items():
        norm = getattr(new, name)
        eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", None))
        branch = branch.double()
        expected = gamma * branch * torch.rsqrt(branch.pow(2).mean(-1, keepdim=True) + eps)
        torch.testing.assert_close(scaled.double(), expected, rtol=1e-6, atol=1e-6)


def test_prune_by_gromov_on_text_and_gamma_refused(tmp_path, capsys):
    folder, corpus = text_source(tmp_path, lambda vocab: _build("olmo2", vocab=vocab), lines=200)
    out = tmp_path / "pruned"
    assert main(["prune", str(folder), "--by", "gromov", "--remove", "1", "--data-path", str(corpus), "--seq-len",
                 "16", "--samples", "6", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    _, evaluation = hf_windows(folder, corpus.read_text(), 16, 6)
    found = re.search(r"^pruned: loss ([0-9.]+) ", printed, re.M)
    assert found, printed
    assert float(found.group(1)) == pytest.approx(hf_loss(AUTO.from_pretrained(out), evaluation), abs=1e-5)
    capsys.readouterr()  # transformers' own load output
    assert main(["prune", str(folder), "--by", "gamma", "--remove", "1", "--data-path", str(corpus), "--seq-len",
                 "16", "--out", str(tmp_path / "by-gamma")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "gamma" in error
    assert not (tmp_path / "by-gamma").exists()


def test_prune_heals_a_post_norm_decoder_on_text(tmp_path, capsys):
    source, corpus = text_source(tmp_path, lambda vocab: _build("gemma2", vocab=vocab))
    assert_healing_moves_weights(source, corpus, tmp_path, main, capsys)
