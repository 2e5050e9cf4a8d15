"""Healing after pruning on timm and Hugging Face models, full fine-tuning and LoRA (peft), on the calibration
split, with the unpruned control healed alike; the steps printed are the steps that ran (a training run's epoch
limit no longer cuts them short while the requested number is printed)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from layerscale.cli import main

timm = pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("sklearn")

from source_models import (corpus_lines, hf_folder, hf_loss, hf_windows, llama, timm_folder, timm_vit,  # noqa: E402
                           tokenizer_vocab, train_bpe_tokenizer, write_text)

STEPS = 6


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("heal")
    lines = corpus_lines(200)
    tokenizer = train_bpe_tokenizer(root / "tokenizer", lines)
    return {"timm": timm_folder(root / "timm", timm_vit(depth=3)),
            "hf": hf_folder(root / "hf", llama(tokenizer_vocab(tokenizer), layers=3), tokenizer),
            "corpus": write_text(root / "corpus.txt", lines)}


def _data(kind, sources):
    if kind == "timm":
        return ["--data", "digits", "--examples", "64"]
    return ["--data-path", str(sources["corpus"]), "--seq-len", "16", "--samples", "12"]


def _weights(kind, folder):
    if kind == "timm":
        return timm.create_model(f"local-dir:{folder}", pretrained=True).state_dict()
    return transformers.AutoModelForCausalLM.from_pretrained(folder).state_dict()


@pytest.mark.parametrize("method", ["full", "lora"])
@pytest.mark.parametrize("kind", ["timm", "hf"])
def test_heal_runs_the_steps_it_reports_and_heals_the_control(sources, tmp_path, capsys, kind, method):
    if method == "lora":
        pytest.importorskip("peft")
    plain, healed = tmp_path / "plain", tmp_path / "healed"
    assert main(["prune", str(sources[kind]), "--blocks", "1", "--out", str(plain)]) == 0
    assert main(["prune", str(sources[kind]), "--blocks", "1", *_data(kind, sources), "--heal-steps", str(STEPS),
                 "--heal", method, "--heal-lr", "1e-2", "--heal-batch-size", "4", "--out", str(healed)]) == 0
    printed = capsys.readouterr().out
    pruned_line = re.search(r"^healed (\d+) steps: loss ([0-9.]+) -> ([0-9.]+)", printed, re.M)
    control_line = re.search(r"^control \(unpruned, healed alike\): (\d+) steps: loss ([0-9.]+) -> ([0-9.]+)",
                             printed, re.M)
    assert pruned_line and control_line, printed
    assert int(pruned_line.group(1)) == STEPS and int(control_line.group(1)) == STEPS
    assert pruned_line.group(2) != pruned_line.group(3) and control_line.group(2) != control_line.group(3)
    record = json.loads((healed / "config.json").read_text())["layerscale_surgery"]
    assert (record["heal_steps"], record["control_heal_steps"], record["heal"]) == (STEPS, STEPS, method)
    before, after = _weights(kind, plain), _weights(kind, healed)
    assert before.keys() == after.keys()  # LoRA merged: the plain library's layout, no adapter keys
    assert not any("lora" in key for key in after)
    changed = [key for key in before if not torch.equal(before[key], after[key])]
    assert changed
    if method == "lora":  # only the adapted linear layers inside the blocks move
        assert all((".blocks." in f".{k}" or ".layers." in k) and k.endswith("weight") for k in changed), changed
    if kind == "hf":  # the healed perplexity printed is transformers' loss of the written model on the same windows
        healed_line = re.search(r"^pruned \+ healed: loss ([0-9.]+) ", printed, re.M)
        _, evaluation = hf_windows(sources["hf"], sources["corpus"].read_text(), 16, 12)
        written = transformers.AutoModelForCausalLM.from_pretrained(healed).eval()
        assert float(healed_line.group(1)) == pytest.approx(hf_loss(written, evaluation), abs=1e-5)


def test_heal_model_cycles_the_calibration_split_for_exactly_the_steps_asked():
    from layerscale.analysis.eval_data.evaluation import as_eval_set
    from layerscale.surgery.healing.heal_loop import heal_model

    model = timm_vit(depth=2)
    data = as_eval_set((torch.randn(5, 1, 8, 8), torch.arange(5)))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    healed, result = heal_model(model, data, 7, batch_size=2, lr=1e-3)  # 3 batches per pass: 7 steps need 3 passes
    assert result.steps == 7 and healed is model and result.method == "full"
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match="healing steps must be an integer >= 1"):
        heal_model(model, data, 0)
    with pytest.raises(ValueError, match="unknown healing method"):
        heal_model(model, data, 1, method="qlora")


RUN_CONFIG = {
    "model": {"name": "vit", "embed_dim": 16, "depth": 3, "num_heads": 2, "patch_size": 4},
    "data": {"name": "digits", "batch_size": 128},
    "optim": {"epochs": 1, "warmup_steps": 1, "lr": 3e-3},
    "run": {"progress": "none", "log_every_steps": 5, "checkpoint_every_steps": 0},
}


def test_a_runs_epoch_limit_no_longer_stops_healing_early(train_with_cli, tmp_path, capsys):
    # digits: 1,438 training images, batch 128: 11 steps per epoch, and the run's config says 1 epoch
    run_dir = train_with_cli(RUN_CONFIG, "heal_epochs")
    heal_out = tmp_path / "heal"
    assert main(["prune", str(run_dir), "--blocks", "1", "--heal-steps", "15", "--heal-out", str(heal_out),
                 "--out", str(tmp_path / "pruned")]) == 0
    printed = capsys.readouterr().out
    assert "healed 15 steps: loss" in printed and "control (unpruned, healed alike): 15 steps" in printed
    assert json.loads((heal_out / "summary.json").read_text())["step"] == 15


def test_heal_out_without_a_training_run_to_keep_is_refused(sources, tmp_path, capsys):
    out, heal_out = tmp_path / "pruned", tmp_path / "heal"
    assert main(["prune", str(sources["hf"]), "--blocks", "1", *_data("hf", sources), "--heal-steps", "2",
                 "--heal-out", str(heal_out), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--heal-out keeps the training run" in err and "\n" not in err
    assert not out.exists() and not heal_out.exists()
