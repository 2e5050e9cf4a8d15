"""``layerscale prune --by`` and ``layerscale analyze --by / --set-search``: the named criteria compared in one table
with intervals, their files written, and every bad value refused in one line with status 2, nothing written."""

from __future__ import annotations

import json

import pytest
import torch

from layerscale.cli import main

from run_configs import tiny_vit_digits_config

pytest.importorskip("safetensors")
pytest.importorskip("matplotlib")
pytest.importorskip("sklearn")

CONFIG = tiny_vit_digits_config(depth=4, validation_fraction=0.2)


@pytest.fixture(scope="module")
def run_dir(train_with_cli):
    return train_with_cli(CONFIG, "criteria_cli")


def test_prune_by_several_criteria_prints_one_table_and_writes_a_figure_per_criterion(run_dir, tmp_path, capsys):
    out = tmp_path / "pruned"
    assert main(["prune", str(run_dir), "--remove", "2", "--by", "gromov,block_influence", "--examples", "60",
                 "--bootstrap", "50", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "gromov: Δ loss [interval] blocks" in printed and "block_influence: Δ loss [interval] blocks" in printed
    assert "block_influence: scores per block" in printed and "gromov: scores" not in printed
    rows = [line for line in printed.splitlines() if line[:3].strip() in ("1", "2") and "[" in line]
    assert len(rows) == 2
    report = out / "pruning_report"
    for name in ("criteria.md", "criteria.tex", "criteria.json", "removal_gromov.svg", "removal_gromov.pdf",
                 "removal_block_influence.svg", "removal_block_influence.pdf", "angular_heatmap.svg",
                 "angular_heatmap.pdf"):
        assert (report / name).stat().st_size > 0, name
    from layerscale.surgery.model_files import read_source_model

    pruned = read_source_model(out).model
    assert len(pruned.blocks) == 2
    removed = json.loads((out / "config.json").read_text())["layerscale_surgery"]["removed_blocks"]
    assert removed[1] == removed[0] + 1  # gromov removes one contiguous span


def test_analyze_by_writes_the_comparison_beside_the_html(run_dir, tmp_path, capsys):
    out = tmp_path / "analysis"
    assert main(["analyze", str(run_dir), "--out", str(out), "--examples", "40", "--bootstrap", "30",
                 "--no-probes", "--by", "gromov,ablation", "--set-search", "greedy", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "set variant" in printed and "greedy by ablation" in printed
    for name in ("analysis.html", "criteria.md", "criteria.tex", "removal_gromov.svg", "removal_ablation.pdf",
                 "angular_heatmap.svg", "depth_summary.tex"):
        assert (out / name).is_file(), name
    assert "<h2>Pruning criteria compared</h2>" in (out / "analysis.html").read_text()
    assert main(["analyze", str(run_dir), "--out", str(out), "--examples", "40", "--no-progress"]) == 2
    assert "already exists; use --force" in capsys.readouterr().err


@pytest.mark.parametrize("command, extra, message", [
    ("prune", ["--remove", "1", "--by", "gromov,shortgpt"], "--by 'shortgpt': unknown criterion; expected one of "
                                                            "gromov, block_influence, angular, ablation, gamma"),
    ("prune", ["--remove", "1", "--by", "gromov,gromov"], "criterion 'gromov' given twice"),
    ("prune", ["--remove", "4", "--by", "gromov"], "has 4 blocks; remove at most 3"),
    ("prune", ["--remove", "1", "--by", "gromov", "--bootstrap", "1"], "--bootstrap must be an int >= 2, got 1"),
    ("analyze", ["--by", "nope"], "--by 'nope': unknown criterion"),
    ("analyze", ["--set-search", "all"], "--set-search 'all': expected one of auto, greedy, exhaustive"),
    ("analyze", ["--set-criterion", "gromov"], "--set-criterion 'gromov': expected one of block_influence"),
])
def test_bad_values_are_one_line_status_2_and_nothing_written(run_dir, tmp_path, capsys, command, extra, message):
    out = tmp_path / "out"
    capsys.readouterr()
    assert main([command, str(run_dir), *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err, err
    assert not out.exists() or not any(out.iterdir())


def test_prune_a_llama_by_gromov_on_calibration_windows_and_judge_it_on_evaluation_windows(tmp_path, capsys):
    """A Hugging Face Llama with a BPE tokenizer trained here: gromov's span is the one an independent float64
    computation on transformers' own hidden states picks on the calibration windows (last token), the printed
    perplexities equal transformers' loss on the evaluation windows, and the table's Δ loss is the pruned model's."""
    import math
    import re

    transformers = pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from source_models import (corpus_lines, hf_folder, hf_loss, hf_windows, llama, tokenizer_vocab,
                               train_bpe_tokenizer, write_text)

    seq_len, samples = 16, 12
    lines = corpus_lines(300)
    tokenizer = train_bpe_tokenizer(tmp_path / "tokenizer", lines)
    folder = hf_folder(tmp_path / "model", llama(tokenizer_vocab(tokenizer), layers=6, hidden=32), tokenizer)
    corpus = write_text(tmp_path / "corpus.txt", lines)
    out = tmp_path / "pruned"
    assert main(["prune", str(folder), "--by", "gromov,block_influence", "--remove", "2", "--data-path", str(corpus),
                 "--seq-len", str(seq_len), "--samples", str(samples), "--bootstrap", "100", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    calibration, evaluation = hf_windows(folder, corpus.read_text(), seq_len, samples)
    source = transformers.AutoModelForCausalLM.from_pretrained(folder).eval().double()
    captured = []
    hook = source.model.layers[-1].register_forward_hook(
        lambda m, a, out: captured.append(out[0] if isinstance(out, tuple) else out))
    with torch.no_grad():
        states = source(input_ids=calibration[:, :-1], output_hidden_states=True).hidden_states
    hook.remove()
    streams = [s[:, -1] for s in states[:6]] + [captured[0][:, -1]]  # x^(0) … x^(6), last token, float64
    distance = [float((torch.acos(torch.nn.functional.cosine_similarity(streams[s], streams[s + 2], dim=-1)
                                  .clamp(-1, 1)) / math.pi).mean()) for s in range(5)]
    start = min(range(5), key=lambda s: (distance[s], s))
    removed = json.loads((out / "config.json").read_text())["layerscale_surgery"]["removed_blocks"]
    assert removed == [start, start + 1]
    pruned = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    unpruned_loss = hf_loss(transformers.AutoModelForCausalLM.from_pretrained(folder).eval(), evaluation)
    for label, loss in (("unpruned", unpruned_loss), ("pruned", hf_loss(pruned, evaluation))):
        found = re.search(rf"^{label}: loss ([0-9.]+) .*perplexity ([0-9.]+)", printed, re.M)
        assert found and float(found.group(1)) == pytest.approx(loss, abs=1e-5), printed
    row = next(line for line in printed.splitlines() if re.match(r"^\s+2\s+[+-]", line))
    assert float(row.split()[1]) == pytest.approx(hf_loss(pruned, evaluation) - unpruned_loss, abs=2e-4)
