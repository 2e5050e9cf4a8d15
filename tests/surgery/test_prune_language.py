"""``layerscale prune --by gromov`` of a Hugging Face Llama on text through its own trained BPE tokenizer: blocks
chosen on the calibration windows, perplexity on the evaluation windows equal to transformers' own loss, the written
folder a complete source again (weights, config, tokenizer)."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from layerscale.cli import main

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from source_models import (corpus_lines, hf_folder, hf_loss, hf_windows, llama, tokenizer_vocab,  # noqa: E402
                           train_bpe_tokenizer, write_jsonl, write_text)

SEQ_LEN, SAMPLES = 16, 12


@pytest.fixture(scope="module")
def llama_source(tmp_path_factory):
    root = tmp_path_factory.mktemp("llama")
    lines = corpus_lines(300)
    tokenizer = train_bpe_tokenizer(root / "tokenizer", lines)
    folder = hf_folder(root / "model", llama(tokenizer_vocab(tokenizer), layers=4, hidden=32), tokenizer)
    return folder, write_text(root / "corpus.txt", lines), lines


def _printed(label: str, text: str) -> tuple[float, float]:
    """(loss, perplexity) of the line ``label: loss X [..], perplexity Y [..]``."""
    found = re.search(rf"^{re.escape(label)}: loss ([0-9.]+) \[[0-9.]+, [0-9.]+\], perplexity ([0-9.]+) "
                      rf"\[([0-9.]+), ([0-9.]+)\]", text, re.M)
    assert found, text
    loss, ppl, low, high = (float(v) for v in found.groups())
    assert low <= ppl <= high
    return loss, ppl


def test_pruned_llama_perplexity_equals_transformers_loss_on_the_same_windows(llama_source, tmp_path, capsys):
    # --by gromov: Gromov et al.'s contiguous span of smallest angular distance, chosen on the calibration windows
    folder, corpus, lines = llama_source
    out = tmp_path / "pruned"
    assert main(["prune", str(folder), "--by", "gromov", "--remove", "2", "--data-path", str(corpus),
                 "--seq-len", str(SEQ_LEN), "--samples", str(SAMPLES), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    calibration, evaluation = hf_windows(folder, corpus.read_text(), SEQ_LEN, SAMPLES)
    assert len(evaluation) == SAMPLES
    assert f"{len(calibration)} calibration and {len(evaluation)} evaluation windows of {SEQ_LEN} tokens" in printed
    source = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    pruned = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert pruned.config.num_hidden_layers == 2
    for label, model in (("unpruned", source), ("pruned", pruned)):
        loss, ppl = _printed(label, printed)
        expected = hf_loss(model, evaluation)
        assert loss == pytest.approx(expected, abs=1e-5)
        assert ppl == pytest.approx(math.exp(expected), abs=1e-5 * max(1.0, math.exp(expected)))
    surgery = json.loads((out / "config.json").read_text())["layerscale_surgery"]
    start = surgery["removed_blocks"][0]
    assert surgery["by"] == "gromov" and surgery["removed_blocks"] == [start, start + 1]  # one contiguous span
    record = surgery["perplexity"]
    for label, model in (("unpruned", source), ("pruned", pruned)):
        assert record[label]["loss"] == pytest.approx(hf_loss(model, evaluation), abs=1e-5)
        assert record[label]["perplexity"] == pytest.approx(math.exp(hf_loss(model, evaluation)), rel=1e-5)
        assert record[label]["windows"] == SAMPLES and record[label]["tokens"] == SAMPLES * (SEQ_LEN - 1)
    # criteria.json: the comparison at full precision; its curve at n = 2 is the pruned model's loss, in windows
    report = out / "pruning_report"
    curve = json.loads((report / "criteria.json").read_text())["curves"]["gromov"]
    assert curve["sets"][1] == surgery["removed_blocks"]
    assert curve["loss"][1] == pytest.approx(hf_loss(pruned, evaluation), abs=1e-5)
    assert f"mean over {SAMPLES} evaluation windows" in (report / "criteria.md").read_text()
    # the written folder carries the tokenizer: it is a complete source for the next command
    assert (out / "tokenizer.json").read_bytes() == (folder / "tokenizer.json").read_bytes()


def test_blocks_are_chosen_on_calibration_windows_disjoint_from_evaluation(llama_source):
    from types import SimpleNamespace

    from layerscale.sources import read_source
    from layerscale.surgery.pruning import prune_cli

    folder, corpus, _ = llama_source
    args = SimpleNamespace(data=None, data_path=str(corpus), tokenizer=None, seq_len=SEQ_LEN, samples=SAMPLES,
                           text_field=None, examples=None, img_size=None)
    calibration, evaluation = prune_cli._eval_data(read_source(folder), args)
    expected_cal, expected_eval = hf_windows(folder, corpus.read_text(), SEQ_LEN, SAMPLES)
    assert torch.equal(calibration.inputs, expected_cal[:, :-1]) and torch.equal(evaluation.targets,
                                                                                   expected_eval[:, 1:])
    seen = {tuple(w.tolist()) for w in expected_cal}
    assert not any(tuple(w.tolist()) in seen for w in expected_eval)


def test_jsonl_with_text_field_reads_the_same_documents(llama_source, tmp_path, capsys):
    folder, _, lines = llama_source
    data = write_jsonl(tmp_path / "corpus.jsonl", lines, field="body")
    assert main(["prune", str(folder), "--by", "angular", "--remove", "1", "--data-path", str(data),
                 "--text-field", "body", "--seq-len", str(SEQ_LEN), "--samples", "4", "--out",
                 str(tmp_path / "p")]) == 0
    printed = capsys.readouterr().out
    _, evaluation = hf_windows(folder, "\n\n".join(lines), SEQ_LEN, 4)
    loss, _ = _printed("unpruned", printed)
    assert loss == pytest.approx(hf_loss(transformers.AutoModelForCausalLM.from_pretrained(folder), evaluation),
                                 abs=1e-5)


def test_a_tokenizer_given_with_tokenizer_travels_into_dest(llama_source, tmp_path, capsys):
    folder, corpus, _ = llama_source
    bare = tmp_path / "bare"  # the same model without its tokenizer files
    bare.mkdir()
    for path in folder.iterdir():
        if path.name in ("config.json", "model.safetensors", "generation_config.json"):
            (bare / path.name).write_bytes(path.read_bytes())
    text = ["--data-path", str(corpus), "--seq-len", str(SEQ_LEN), "--samples", "4"]
    assert main(["prune", str(bare), "--by", "gromov", "--remove", "1", *text, "--out", str(tmp_path / "x")]) == 2
    assert "has no tokenizer files; give --tokenizer" in capsys.readouterr().err
    assert main(["prune", str(bare), "--by", "gromov", "--remove", "1", *text, "--tokenizer", str(folder),
                 "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "tokenizer.json").read_bytes() == (folder / "tokenizer.json").read_bytes()
    assert main(["analyze", str(tmp_path / "p"), *text, "--bootstrap", "20", "--no-progress",
                 "--out", str(tmp_path / "a")]) == 0  # DEST's own tokenizer now
