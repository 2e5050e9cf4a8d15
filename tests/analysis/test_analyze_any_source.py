"""``layerscale analyze`` takes every source the resolver reads: a timm folder, a Hugging Face folder with its
tokenizer (one weights file or shards), and the folders ``prune`` and ``grow`` write from them; the loss and
perplexity it prints for a language model are transformers' own loss on the same evaluation windows."""

from __future__ import annotations

import math
import re

import pytest

from layerscale.analysis import DepthAnalysis
from layerscale.cli import main

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")
pytest.importorskip("tokenizers")
pytest.importorskip("matplotlib")

from source_models import (corpus_lines, hf_folder, hf_loss, hf_windows, llama, timm_folder, timm_vit,  # noqa: E402
                           tokenizer_vocab, train_bpe_tokenizer, write_text)

SEQ_LEN, SAMPLES = 16, 10
QUICK = ["--bootstrap", "20", "--probe-splits", "1", "--no-progress"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    lines = corpus_lines(300)
    tokenizer = train_bpe_tokenizer(root / "tokenizer", lines)
    model = llama(tokenizer_vocab(tokenizer), layers=4, hidden=32)
    return {"hf": hf_folder(root / "hf", model, tokenizer),
            "hf_sharded": hf_folder(root / "hf_sharded", model, tokenizer, shard="20KB"),
            "timm": timm_folder(root / "timm", timm_vit(depth=3)),
            "corpus": write_text(root / "corpus.txt", lines), "tokenizer": tokenizer}


def _analyze(source, out, *extra):
    return main(["analyze", str(source), "--out", str(out), *extra, *QUICK])


def _text(sources):
    return ["--data-path", str(sources["corpus"]), "--seq-len", str(SEQ_LEN), "--samples", str(SAMPLES)]


def test_hf_folder_analysed_on_evaluation_windows_with_transformers_loss(sources, tmp_path, capsys):
    assert _analyze(sources["hf"], tmp_path / "a", *_text(sources)) == 0
    printed = capsys.readouterr().out
    result = DepthAnalysis.read_json(tmp_path / "a" / "analysis.json")
    _, evaluation = hf_windows(sources["hf"], sources["corpus"].read_text(), SEQ_LEN, SAMPLES)
    expected = hf_loss(transformers.AutoModelForCausalLM.from_pretrained(sources["hf"]).eval(), evaluation)
    assert result.depth == 4 and result.num_examples == SAMPLES and result.task == "language_model"
    assert result.clean_loss == pytest.approx(expected, abs=1e-5)
    assert f"{SAMPLES} evaluation windows of {SEQ_LEN} tokens" in printed
    assert result.settings["data"] == [line.strip() for line in printed.splitlines() if "tokenizer:" in line]
    found = re.search(r"perplexity ([0-9.]+) \[([0-9.]+), ([0-9.]+)\]", printed)
    assert found and float(found.group(1)) == pytest.approx(math.exp(expected), rel=1e-5)
    low, high = result.intervals["clean_loss"]
    assert float(found.group(2)) == pytest.approx(math.exp(low), rel=1e-5)
    assert float(found.group(3)) == pytest.approx(math.exp(high), rel=1e-5)


def test_sharded_hf_folder_gives_the_same_analysis(sources, tmp_path):
    assert list(sources["hf_sharded"].glob("model-*-of-*.safetensors"))
    assert _analyze(sources["hf"], tmp_path / "one", *_text(sources)) == 0
    assert _analyze(sources["hf_sharded"], tmp_path / "shards", *_text(sources)) == 0
    one, shards = (DepthAnalysis.read_json(tmp_path / name / "analysis.json") for name in ("one", "shards"))
    assert one.clean_loss == shards.clean_loss and one.ablation_loss == shards.ablation_loss


def test_timm_folder_analysed_on_an_image_dataset(sources, tmp_path):
    pytest.importorskip("sklearn")
    assert _analyze(sources["timm"], tmp_path / "a", "--data", "digits", "--examples", "40") == 0
    result = DepthAnalysis.read_json(tmp_path / "a" / "analysis.json")
    assert result.depth == 3 and result.num_examples == 40 and result.task == "classification"


def test_a_timm_folder_is_scored_under_its_own_normalisation(sources, tmp_path, capsys):
    """timm's convention: a model's images are normalised with its data configuration's mean and std (timm's
    ``resolve_data_config``, from ``pretrained_cfg``), not with the dataset's own statistics; the loss is the one
    the model gives on the same images normalised that way by hand."""
    pytest.importorskip("sklearn")
    import torch
    import torch.nn.functional as F
    from timm.data import resolve_data_config

    from layerscale.data.registry import load_dataset

    assert _analyze(sources["timm"], tmp_path / "a", "--data", "digits", "--examples", "40") == 0
    assert "normalised with the model's own mean and std" in capsys.readouterr().out
    model = timm.create_model(f"local-dir:{sources['timm']}", pretrained=True).eval()  # as a timm user loads it
    config = resolve_data_config({}, model=model)
    bundle = load_dataset("digits", img_size=8, test_fraction=0.2, seed=0)  # the dataset's own statistics
    images = torch.stack([bundle.test[i][0] for i in range(40)])
    labels = torch.stack([bundle.test[i][1] for i in range(40)])
    pixels = images * torch.tensor(bundle.std).view(1, -1, 1, 1) + torch.tensor(bundle.mean).view(1, -1, 1, 1)
    timm_inputs = (pixels - torch.tensor(config["mean"]).view(1, -1, 1, 1)) / torch.tensor(config["std"]).view(
        1, -1, 1, 1)
    with torch.no_grad():
        expected = F.cross_entropy(model(timm_inputs), labels).item()
        dataset_scaled = F.cross_entropy(model(images), labels).item()
    result = DepthAnalysis.read_json(tmp_path / "a" / "analysis.json")
    assert result.clean_loss == pytest.approx(expected, rel=1e-5)
    assert dataset_scaled != pytest.approx(expected, rel=1e-5)  # the dataset's statistics give another loss here


def test_prune_and_grow_outputs_are_sources_of_analyze_and_of_each_other(sources, tmp_path, capsys):
    pruned, grown, regrown = tmp_path / "pruned", tmp_path / "grown", tmp_path / "regrown"
    assert main(["prune", str(sources["hf"]), "--blocks", "1", "--out", str(pruned)]) == 0
    assert main(["grow", str(pruned), "--insert", "1", "--where", "top", "--fold", "--out", str(grown)]) == 0
    assert main(["prune", str(grown), "--blocks", "0", "--out", str(regrown)]) == 0
    for folder, depth in ((pruned, 3), (grown, 4), (regrown, 3)):
        assert (folder / "tokenizer.json").is_file()  # the tokenizer travels with the model
        assert _analyze(folder, tmp_path / f"a-{folder.name}", *_text(sources)) == 0  # its own tokenizer
        result = DepthAnalysis.read_json(tmp_path / f"a-{folder.name}" / "analysis.json")
        assert result.depth == depth
        _, evaluation = hf_windows(sources["hf"], sources["corpus"].read_text(), SEQ_LEN, SAMPLES)
        plain = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
        assert result.clean_loss == pytest.approx(hf_loss(plain, evaluation), abs=1e-5)
    timm_grown, timm_pruned = tmp_path / "timm_grown", tmp_path / "timm_pruned"
    assert main(["grow", str(sources["timm"]), "--insert", "2", "--where", "top", "--out", str(timm_grown)]) == 0
    assert main(["prune", str(timm_grown), "--blocks", "0", "--out", str(timm_pruned)]) == 0
    pytest.importorskip("sklearn")
    for folder, depth in ((timm_grown, 5), (timm_pruned, 4)):
        assert _analyze(folder, tmp_path / f"a-{folder.name}", "--data", "digits", "--examples", "30") == 0
        assert DepthAnalysis.read_json(tmp_path / f"a-{folder.name}" / "analysis.json").depth == depth


RUN_CONFIG = {
    "model": {"name": "vit", "embed_dim": 16, "depth": 3, "num_heads": 2, "patch_size": 4},
    "data": {"name": "digits", "batch_size": 64},
    "optim": {"epochs": 1, "max_steps": 3, "warmup_steps": 1, "lr": 3e-3},
    "run": {"progress": "none", "log_every_steps": 3, "checkpoint_every_steps": 3},
}


def test_prune_output_of_a_training_run_keeps_the_runs_data(train_with_cli, tmp_path):
    pytest.importorskip("sklearn")
    run_dir = train_with_cli(RUN_CONFIG, "analyze_pruned_run")
    pruned = tmp_path / "pruned"
    assert main(["prune", str(run_dir), "--blocks", "2", "--out", str(pruned)]) == 0
    assert (pruned / "train.yaml").is_file()
    # no --data: the folder's train.yaml names the run's dataset, and its held-out split is the evaluation set
    assert _analyze(pruned, tmp_path / "a", "--examples", "50") == 0
    assert _analyze(run_dir, tmp_path / "b", "--examples", "50") == 0
    after, before = (DepthAnalysis.read_json(tmp_path / name / "analysis.json") for name in ("a", "b"))
    assert (after.depth, before.depth, after.num_examples) == (2, 3, 50)
    # the same evaluation images: exiting after the 0, 1, 2 blocks the two models share gives the same losses
    assert after.early_exit_loss[:3] == pytest.approx(before.early_exit_loss[:3], abs=1e-6)


def test_our_byte_level_gpt_folder_reads_text_as_bytes(sources, tmp_path):
    import torch
    import torch.nn.functional as F

    from layerscale import create_model

    torch.manual_seed(0)
    gpt = create_model("gpt", vocab_size=256, block_size=32, embed_dim=16, depth=2, num_heads=2).eval()
    gpt.save_pretrained(tmp_path / "gpt")
    assert _analyze(tmp_path / "gpt", tmp_path / "a", "--data-path", str(sources["corpus"]), "--seq-len", "32",
                    "--samples", "6") == 0
    data = sources["corpus"].read_bytes()
    windows = torch.tensor(list(data[:len(data) // 32 * 32])).reshape(-1, 32)
    evaluation = windows[(len(windows) + 1) // 2:][:6]
    with torch.no_grad():
        logits = gpt(evaluation[:, :-1])
    expected = float(F.cross_entropy(logits.transpose(1, 2), evaluation[:, 1:]))
    assert DepthAnalysis.read_json(tmp_path / "a" / "analysis.json").clean_loss == pytest.approx(expected, abs=1e-5)
