import json

import pytest
import torch
from train_helpers import tiny_config

from layerscale.train import Callback, run
from layerscale.train.state.checkpoint import load_checkpoint
from layerscale.train.records.metrics_log import read_metrics


def test_a_run_leaves_config_metrics_checkpoints_and_summary(tmp_path):
    config = tiny_config(optim={"max_steps": 0, "epochs": 1}, data={"batch_size": 128},
                         run={"checkpoint_every_steps": 3, "keep_checkpoints": 2, "eval_every_steps": 5})
    result = run(config, out=tmp_path / "run")
    run_dir = tmp_path / "run"
    assert result.run_dir == run_dir and result.step == 11 and result.epoch == 1  # 1438 // 128 steps
    assert {p.name for p in run_dir.iterdir()} == {"config.yaml", "metrics.jsonl", "checkpoints", "summary.json",
                                                   ".lock"}  # the run lock (train.state.run_lock), released
    assert [p.name for p in sorted((run_dir / "checkpoints").iterdir())] == ["step_00000009", "step_00000011"]
    records = read_metrics(run_dir / "metrics.jsonl")
    train = [r for r in records if r["split"] == "train"]
    evals = [r for r in records if r["split"] == "eval"]
    assert [r["step"] for r in train] == [4, 8, 11] and [r["step"] for r in evals] == [5, 10, 11]
    assert {"step", "epoch", "time", "loss", "accuracy", "lr", "grad_norm", "throughput"} <= set(train[0])
    assert evals[-1]["samples"] == 359 and 0.0 <= evals[-1]["accuracy"] <= 1.0
    assert result.metrics["loss"] == evals[-1]["loss"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["step"] == 11 and summary["checkpoint"].endswith("step_00000011")
    environment = summary["environment"]  # what bitwise agreement with another run depends on
    expected_device = "cuda:0" if torch.cuda.is_available() else "cpu"  # run.device: auto
    assert environment["torch"] == torch.__version__ and environment["device"] == expected_device
    assert environment["threads"] == torch.get_num_threads() and environment["cpu"]
    weights, state = load_checkpoint(run_dir / "checkpoints" / "step_00000011")
    assert state["step"] == 11 and (state["epoch"], state["batch_in_epoch"]) == (1, 0)
    assert all(torch.isfinite(t).all() for t in weights.values())


def test_training_learns_digits_beyond_chance(tmp_path):
    config = tiny_config(optim={"max_steps": 0, "epochs": 3, "lr": 3e-3}, data={"augment": False})
    result = run(config, out=tmp_path / "run")
    assert result.metrics["accuracy"] > 0.2  # ten classes: chance is 0.1


class Recorder(Callback):
    def __init__(self):
        self.calls = []

    def on_train_start(self, trainer):
        self.calls.append(("start", trainer.state.step))

    def on_step_end(self, trainer, step):
        self.calls.append(("step", step))
        assert trainer.batch[0].shape == (32, 1, 8, 8)
        if step % 2 == 0:
            gamma = trainer.model.blocks[0].ls1.gamma
            trainer.log({"split": "diagnostics", "ls1_gamma_norm": gamma.norm().item()})

    def on_eval_end(self, trainer, step, metrics):
        self.calls.append(("eval", step, metrics["split"]))

    def on_checkpoint(self, trainer, step, path):
        self.calls.append(("checkpoint", step, path.name))

    def on_train_end(self, trainer):
        self.calls.append(("end", trainer.state.step))


def test_callbacks_are_called_and_their_records_join_the_metrics(tmp_path):
    recorder = Recorder()
    config = tiny_config(optim={"max_steps": 4})
    config["diagnostics"] = {"enabled": False}  # only the recorder's own "diagnostics" records
    run(config, out=tmp_path / "run", callbacks=[recorder])
    assert recorder.calls == [("start", 0), ("step", 1), ("step", 2), ("step", 3), ("step", 4), ("eval", 4, "eval"),
                              ("checkpoint", 4, "step_00000004"), ("end", 4)]
    diagnostics = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["split"] == "diagnostics"]
    assert [r["step"] for r in diagnostics] == [2, 4] and diagnostics[0]["ls1_gamma_norm"] > 0


def test_gpt_on_a_text_file_reports_perplexity(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_bytes(b"the quick brown fox jumps over the lazy dog. " * 40)
    config = {"model": {"name": "gpt", "embed_dim": 32, "depth": 2, "num_heads": 2, "block_size": 16},
              "data": {"name": "text", "path": str(text), "batch_size": 8},
              "optim": {"epochs": 1, "max_steps": 6}, "run": {"progress": "none", "tensorboard": True}}
    result = run(config, out=tmp_path / "run")
    assert result.metrics["perplexity"] == pytest.approx(torch.tensor(result.metrics["loss"]).exp().item())
    assert result.metrics["samples"] == (len(text.read_bytes()) // 10 - 1) // 16 * 16  # eval tokens, each once
    assert any((tmp_path / "run" / "tensorboard").iterdir())


def test_model_and_dataset_kinds_must_match(tmp_path):
    config = tiny_config()
    config["model"] = {"name": "gpt_nano"}
    with pytest.raises(ValueError, match="model 'gpt_nano' is a language model, but data.name is 'digits'"):
        run(config, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
