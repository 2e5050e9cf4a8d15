"""The language-data layer: text / JSONL read as hostile input, the tokenizer folder, windows and their disjoint
calibration / evaluation split; and perplexity with its interval over windows, against hand computations."""

from __future__ import annotations

import math

import pytest
import torch

from layerscale.data.corpus_file import read_corpus
from layerscale.data.token_windows import split_windows, token_windows


def test_windows_are_cut_from_the_start_and_split_in_halves():
    windows = token_windows(list(range(23)), 4)  # 5 windows, the 3-token tail unused
    assert windows.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [16, 17, 18, 19]]
    calibration, evaluation = split_windows(windows, None)
    assert calibration.tolist() == windows[:3].tolist() and evaluation.tolist() == windows[3:].tolist()
    calibration, evaluation = split_windows(windows, 1)
    assert calibration.tolist() == [[0, 1, 2, 3]] and evaluation.tolist() == [[12, 13, 14, 15]]
    with pytest.raises(ValueError, match="gives 1 window"):
        split_windows(token_windows(list(range(5)), 4), None)
    with pytest.raises(ValueError, match="--seq-len must be an integer >= 2"):
        token_windows([1, 2, 3], 1)
    with pytest.raises(ValueError, match="--samples must be an integer >= 1"):
        split_windows(windows, 0)


def test_jsonl_documents_are_joined_with_a_blank_line_and_bad_lines_named(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "one"}\n\n{"text": "two", "x": 1}\n')
    assert read_corpus(path) == "one\n\ntwo"
    path.write_text('{"text": "one"}\n{"text": 3}\n')
    with pytest.raises(ValueError, match="line 2: field 'text' is a int, expected a string"):
        read_corpus(path)
    path.write_text('{"text": "one"}\n[1, 2]\n')
    with pytest.raises(ValueError, match="line 2 holds a list, expected a JSON object"):
        read_corpus(path)
    with pytest.raises(ValueError, match="refused"):
        read_corpus(tmp_path / "missing.txt")
    big = tmp_path / "big.txt"
    big.write_text("x" * 100)
    with pytest.raises(ValueError, match="expected at most 10 bytes"):
        read_corpus(big, limit=10)
    plain = tmp_path / "p.txt"
    plain.write_text("héllo\nworld\n")
    assert read_corpus(plain) == "héllo\nworld\n"


def test_tokenizer_folder_reads_tokenizer_json_without_special_tokens(tmp_path):
    pytest.importorskip("transformers")
    from source_models import corpus_lines, tokenizer_vocab, train_bpe_tokenizer
    from tokenizers import Tokenizer

    from layerscale.data.tokenizer_folder import byte_tokenizer, load_tokenizer

    folder = train_bpe_tokenizer(tmp_path / "tok", corpus_lines(100))
    loaded = load_tokenizer(folder)
    reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert loaded.encode("the deep model") == reference.encode("the deep model", add_special_tokens=False).ids
    assert loaded.vocab_size == tokenizer_vocab(folder)
    assert byte_tokenizer().encode("é") == [0xC3, 0xA9]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no tokenizer files"):
        load_tokenizer(tmp_path / "empty")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "tokenizer.json").symlink_to(folder / "tokenizer.json")
    with pytest.raises(ValueError, match="symbolic link inside the tokenizer folder"):
        load_tokenizer(tmp_path / "linked")


def test_a_folder_without_tokenizer_json_is_read_with_transformers_autotokenizer(tmp_path):
    pytest.importorskip("transformers")
    import json

    from source_models import corpus_lines, train_bpe_tokenizer
    from tokenizers import Tokenizer

    from layerscale.data.tokenizer_folder import load_tokenizer

    fast = train_bpe_tokenizer(tmp_path / "fast", corpus_lines(100))
    slow = tmp_path / "slow"  # a slow GPT-2 tokenizer's files: vocab.json, merges.txt, tokenizer_config.json
    slow.mkdir()
    Tokenizer.from_file(str(fast / "tokenizer.json")).model.save(str(slow))
    (slow / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer"}))
    text = "the deep model reads a token window.\nlayer scale"
    assert load_tokenizer(slow).encode(text) == load_tokenizer(fast).encode(text)


def test_perplexity_is_exp_of_the_mean_window_loss_with_the_bootstrap_interval():
    from layerscale.analysis.measures.perplexity import perplexity_of
    from layerscale.stats.bootstrap import bootstrap_means, bootstrap_weights, percentile_interval

    losses = torch.tensor([2.0, 2.5, 3.0, 1.5, 2.2], dtype=torch.float64)
    found = perplexity_of(losses, tokens_per_window=7, replicates=500, seed=3)
    assert found.loss == pytest.approx(2.24) and found.perplexity == pytest.approx(math.exp(2.24))
    low, high = percentile_interval(bootstrap_means(losses, bootstrap_weights(5, 500, 3)), 0.95)
    assert found.loss_interval == (pytest.approx(float(low)), pytest.approx(float(high)))
    assert found.perplexity_interval == (pytest.approx(math.exp(float(low))), pytest.approx(math.exp(float(high))))
    assert (found.windows, found.tokens) == (5, 35)
    assert "perplexity 9.393331" in found.line()


def test_a_tokenizer_without_a_vocabulary_is_refused_naming_the_folder(tmp_path):
    """transformers loads a folder naming a slow class but holding no vocabulary file as a one-id tokenizer that
    encodes every text to nothing; without the check it surfaced later as "the data gives 0 window(s)"."""
    pytest.importorskip("transformers")
    import json

    from layerscale.data.tokenizer_folder import load_tokenizer

    folder = tmp_path / "novocab"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer"}))
    with pytest.raises(ValueError, match=r"novocab: the tokenizer has no vocabulary \(1 id\(s\)"):
        load_tokenizer(folder)
