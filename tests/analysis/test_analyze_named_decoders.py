"""``layerscale analyze`` on Hugging Face folders of decoders whose branches are not named as Llama's — OPT, BLOOM,
GPT-NeoX (Pythia, parallel branches), Falcon — and on a mixture of experts (Granite MoE): the clean loss is
transformers' own loss on the same evaluation windows, and each block's ablation loss is the loss of the model with
that layer skipped by a forward hook (written independently of the analysis). OPT-350m's Post-LN layers are refused in
one line. A branch-output probe point is the branch's own output even where the layer adds into it in place
afterwards (Falcon)."""

from __future__ import annotations

import pytest
import torch

from layerscale.analysis import DepthAnalysis
from layerscale.analysis.removal.streams import find_block_stack
from layerscale.cli import main

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("matplotlib")

from source_models import (corpus_lines, hf_folder, hf_loss, hf_windows, skipping_layer,  # noqa: E402
                           tokenizer_vocab, train_bpe_tokenizer, write_text)

SEQ_LEN, SAMPLES, DEPTH = 16, 6, 3
QUICK = ["--bootstrap", "20", "--probe-splits", "1", "--no-progress"]
TEXT = dict(hidden_size=32, num_hidden_layers=DEPTH, num_attention_heads=4, max_position_embeddings=64,
            bos_token_id=0, eos_token_id=0, pad_token_id=0)
FAMILIES = {
    "opt": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=48, word_embed_proj_dim=32)),
    "bloom": ("BloomConfig", "BloomForCausalLM", dict(n_layer=DEPTH, n_head=4)),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(intermediate_size=48, use_parallel_residual=True)),
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM", dict(intermediate_size=48, num_local_experts=2,
                                                                     num_experts_per_tok=1, residual_multiplier=0.5)),
    "falcon": ("FalconConfig", "FalconForCausalLM", dict(ffn_hidden_size=48)),
    "mpt": ("MptConfig", "MptForCausalLM", dict(d_model=32, n_heads=4, n_layers=DEPTH)),
    "mamba": ("MambaConfig", "MambaForCausalLM", dict(state_size=4)),  # one branch per block: its mixer
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    lines = corpus_lines(200)
    return {"tokenizer": train_bpe_tokenizer(root / "tokenizer", lines), "text": write_text(root / "corpus.txt", lines)}


def _model(family, vocab, **overrides):
    config_name, model_name, extra = FAMILIES[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**TEXT, vocab_size=vocab, **{**extra, **overrides})
    return getattr(transformers, model_name)(config).eval()


def _skipping_loss(model, windows, skip):
    with skipping_layer(model, skip):
        return hf_loss(model, windows)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_folder_is_analysed_with_transformers_loss_and_each_block_skipped_exactly(corpus, tmp_path, family):
    model = _model(family, tokenizer_vocab(corpus["tokenizer"]))
    folder = hf_folder(tmp_path / "model", model, corpus["tokenizer"])
    assert main(["analyze", str(folder), "--out", str(tmp_path / "a"), "--data-path", str(corpus["text"]),
                 "--seq-len", str(SEQ_LEN), "--samples", str(SAMPLES), *QUICK]) == 0
    result = DepthAnalysis.read_json(tmp_path / "a" / "analysis.json")
    _, evaluation = hf_windows(folder, corpus["text"].read_text(), SEQ_LEN, SAMPLES)
    assert result.depth == DEPTH and result.num_examples == SAMPLES
    assert result.clean_loss == pytest.approx(hf_loss(model, evaluation), abs=1e-5)
    expected = [_skipping_loss(model, evaluation, skip) for skip in range(DEPTH)]
    assert result.ablation_loss == pytest.approx(expected, abs=1e-5)
    assert min(abs(a - result.clean_loss) for a in result.ablation_loss) > 1e-6  # each block does something


def test_opt_post_ln_is_refused_in_one_line(corpus, tmp_path, capsys):
    model = _model("opt", tokenizer_vocab(corpus["tokenizer"]), do_layer_norm_before=False)
    folder = hf_folder(tmp_path / "model", model, corpus["tokenizer"])
    capsys.readouterr()
    out = tmp_path / "a"
    assert main(["analyze", str(folder), "--out", str(out), "--data-path", str(corpus["text"]), "--seq-len",
                 str(SEQ_LEN), "--samples", str(SAMPLES), *QUICK]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "do_layer_norm_before=False" in error and "Post-LN" in error
    assert not (out / "analysis.json").exists()


def test_a_branch_output_point_is_the_branchs_own_output_when_the_layer_adds_into_it_in_place():
    model = _model("falcon", 64)  # FalconDecoderLayer: mlp_output += attention_output after the MLP returns
    tokens = torch.randint(3, 60, (2, 10), generator=torch.Generator().manual_seed(1))
    stack = find_block_stack(model, lambda t: model(t, use_cache=False))
    own = {}
    handles = [layer.mlp.register_forward_hook(lambda m, a, out, i=i: own.__setitem__(i, out.clone()))
               for i, layer in enumerate(model.transformer.h)]
    try:
        with torch.no_grad():
            captured = stack.capture(tokens, module_points=True)
    finally:
        for handle in handles:
            handle.remove()
    assert [torch.equal(point, own[i]) for i, point in enumerate(captured.points["mlp_out"])] == [True] * DEPTH
