"""``layerscale.train.run(model=..., train_data=...)``: the trainer on the user's own module and data — training,
exact resume after an interruption, the non-finite guard, diagnostics on user blocks, and the refusals."""

import json
import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from layerscale.layers import Block
from layerscale.train import Callback, NonFiniteError, run
from layerscale.train.records.metrics_log import read_metrics

CONFIG = {"data": {"batch_size": 16}, "optim": {"epochs": 3, "lr": 1e-2, "warmup_steps": 2},
          "run": {"progress": "none", "log_every_steps": 2, "checkpoint_every_steps": 4, "keep_checkpoints": 10}}


class TinyClassifier(nn.Module):
    """A user's classifier with dropout (the resumed run must replay the random draws)."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, width), nn.GELU(), nn.Dropout(0.2))
        self.head = nn.Linear(width, 3)

    def forward(self, x):
        return self.head(self.body(x))


class TinyTransformerLM(nn.Module):
    """A user's language model built from layerscale blocks (so the per-layer diagnostics find them)."""

    def __init__(self, vocab: int = 11, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, num_heads=2, init_value=0.1) for _ in range(2))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def classification_data(n: int = 96, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    return TensorDataset(x, x[:, :3].argmax(1))


def weights(run_dir):
    from layerscale.checkpoint_io import load_state_dict_file

    return load_state_dict_file(sorted((run_dir / "checkpoints").glob("step_*"))[-1] / "model.safetensors")


class Interrupt(Callback):
    """Kills the run (an exception out of ``run``) right after the checkpoint of step ``at``."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_checkpoint(self, trainer, step, path):
        if step == self.at:
            raise KeyboardInterrupt


def _comparable(records):
    return [{k: v for k, v in r.items() if k not in ("time", "throughput")} for r in records]


def test_user_model_trains_and_writes_a_run_directory(tmp_path):
    torch.manual_seed(0)
    result = run(model=TinyClassifier(), train_data=classification_data(), eval_data=classification_data(32, 1),
                 config=CONFIG, out=tmp_path / "run")
    assert result.step == 18 and result.epoch == 3  # 96 / 16 = 6 steps per epoch
    assert 0.0 <= result.metrics["accuracy"] <= 1.0 and math.isfinite(result.metrics["loss"])
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    train_losses = [r["loss"] for r in records if r["split"] == "train"]
    assert train_losses[-1] < train_losses[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["model"]["name"] == f"user:{__name__}.TinyClassifier"
    assert "model:\n  name: user:" in (tmp_path / "run" / "config.yaml").read_text()


def test_interrupted_user_run_resumes_bit_identically(tmp_path):
    torch.manual_seed(0)
    initial = TinyClassifier().state_dict()
    reference_model = TinyClassifier()
    reference_model.load_state_dict(initial)
    run(model=reference_model, train_data=classification_data(), eval_data=classification_data(32, 1),
        config=CONFIG, out=tmp_path / "uninterrupted")

    killed = TinyClassifier()
    killed.load_state_dict(initial)
    with pytest.raises(KeyboardInterrupt):
        run(model=killed, train_data=classification_data(), eval_data=classification_data(32, 1), config=CONFIG,
            out=tmp_path / "killed", callbacks=[Interrupt(at=8)])
    assert sorted(p.name for p in (tmp_path / "killed" / "checkpoints").iterdir())[-1] == "step_00000008"

    torch.manual_seed(123)  # a fresh instance with other weights: everything must come from the checkpoint
    result = run(model=TinyClassifier(), train_data=classification_data(), eval_data=classification_data(32, 1),
                 resume=tmp_path / "killed")
    assert result.step == 18
    expected, got = weights(tmp_path / "uninterrupted"), weights(tmp_path / "killed")
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"{name} differs after resume"
    assert _comparable(read_metrics(tmp_path / "killed" / "metrics.jsonl")) == \
        _comparable(read_metrics(tmp_path / "uninterrupted" / "metrics.jsonl"))


def test_default_run_directory_is_named_after_the_model_class(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(model=TinyClassifier(), train_data=classification_data(), config=CONFIG)
    assert result.run_dir.parent.name == "runs" and result.run_dir.name.startswith("TinyClassifier-")
    assert (tmp_path / result.run_dir / "summary.json").is_file()


def test_resume_refuses_another_model_class_or_architecture(tmp_path):
    run(model=TinyClassifier(), train_data=classification_data(), config=CONFIG, out=tmp_path / "run")
    before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
    with pytest.raises(ValueError, match=r"checkpoint of model 'user:.*TinyClassifier', the model passed is "
                                         r"'user:torch.nn.modules.linear.Linear'"):
        run(model=nn.Linear(6, 3), train_data=classification_data(), resume=tmp_path / "run")
    with pytest.raises(ValueError, match=r"another architecture.*shape \(checkpoint vs model\)"):
        run(model=TinyClassifier(width=8), train_data=classification_data(), resume=tmp_path / "run")
    with pytest.raises(ValueError, match="a resumed run uses .*config.yaml"):
        run(model=TinyClassifier(), train_data=classification_data(), config=CONFIG, resume=tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before


def test_layerscale_train_cli_refuses_to_resume_a_user_model_run(tmp_path):
    from layerscale.cli import main

    run(model=TinyClassifier(), train_data=classification_data(), config=CONFIG, out=tmp_path / "run")
    assert main(["train", "--resume", str(tmp_path / "run")]) == 2


class Blowup(nn.Module):
    """The identity for ``after`` forwards in training mode, then infinite."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.calls = after, 0

    def forward(self, x):
        self.calls += int(self.training)
        return x * math.inf if self.calls > self.after else x


class Explode(nn.Module):
    def __init__(self, after: int) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 3)
        self.blowup = Blowup(after)

    def forward(self, x):
        return self.blowup(self.linear(x))


def test_nonfinite_guard_stops_a_user_model_run(tmp_path):
    with pytest.raises(NonFiniteError, match=r"non-finite loss at step 4 .*first non-finite output: blowup"):
        run(model=Explode(after=3), train_data=classification_data(), config=CONFIG, out=tmp_path / "run")
    events = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r.get("event") == "nonfinite"]
    assert events and events[0]["step"] == 4


def test_language_model_default_loss_diagnostics_and_dataloader(tmp_path):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 11, (48, 9), generator=g)
    data = TensorDataset(tokens[:, :-1], tokens[:, 1:])  # (tokens, next tokens)
    torch.manual_seed(0)
    result = run(model=TinyTransformerLM(), train_data=DataLoader(data, batch_size=8, shuffle=True),
                 eval_data=data, out=tmp_path / "lm",
                 config={"optim": {"epochs": 1}, "run": {"progress": "none"}, "diagnostics": {"every": 2}})
    assert result.step == 6  # the DataLoader's batch_size is the batch: 48 / 8
    assert result.metrics["samples"] == 48 * 8  # every position is one prediction
    assert result.metrics["perplexity"] == pytest.approx(math.exp(result.metrics["loss"]))
    diagnostics = [r for r in read_metrics(tmp_path / "lm" / "metrics.jsonl") if r["split"] == "diagnostics"]
    assert diagnostics and len(diagnostics[0]["blocks"]) == 2


def test_custom_loss_without_class_outputs_reports_no_accuracy(tmp_path):
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    data = TensorDataset(x, x.sum(1, keepdim=True))
    result = run(model=nn.Linear(4, 1), train_data=data, eval_data=data, loss_fn=nn.functional.mse_loss,
                 config={"data": {"batch_size": 8}, "optim": {"epochs": 1}, "run": {"progress": "none"}},
                 out=tmp_path / "reg")
    assert "accuracy" not in result.metrics and math.isfinite(result.metrics["loss"])
    assert all("accuracy" not in r for r in read_metrics(tmp_path / "reg" / "metrics.jsonl"))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"config": {"model": {"name": "vit"}}}, "config key model: a run of a given model= takes no model section"),
    ({"config": {"data": {"name": "digits"}}}, "config key data.name: a run on train_data= loads no dataset"),
    ({"train_data": [1, 2, 3]}, r"train_data\[0\]: expected an \(inputs, target\) pair, got int"),
    ({"train_data": TensorDataset(torch.randn(4, 6), torch.randn(4, 2))},
     r"the default loss takes a class index .* got a torch.float32 tensor of shape \(2,\); pass loss_fn="),
    ({"model": "vit"}, "model must be a torch.nn.Module, got str"),
    ({"loss_fn": 3}, "loss_fn must be callable"),
])
def test_bad_user_model_input_is_one_line_before_anything_is_written(tmp_path, kwargs, message):
    arguments = {"model": TinyClassifier(), "train_data": classification_data(), "out": tmp_path / "run", **kwargs}
    with pytest.raises(ValueError, match=message) as info:
        run(**arguments)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_user_model_under_torchrun_ddp_matches_one_process(tmp_path):
    import sys
    from pathlib import Path

    from torchrun_user_model import CONFIG, build
    from train_helpers import run_command

    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(Path(__file__).with_name("torchrun_user_model.py")), str(tmp_path / "two")]
    done = run_command(command, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    model, train, evaluation = build()
    run(model=model, train_data=train, eval_data=evaluation, config=CONFIG, out=tmp_path / "one")
    expected, got = weights(tmp_path / "one"), weights(tmp_path / "two")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-5, msg=name)
    one = [r for r in read_metrics(tmp_path / "one" / "metrics.jsonl") if r["split"] == "eval"]
    two = [r for r in read_metrics(tmp_path / "two" / "metrics.jsonl") if r["split"] == "eval"]
    assert [r["step"] for r in one] == [r["step"] for r in two] and two[-1]["samples"] == 37
    for a, b in zip(one, two, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-5) and b["accuracy"] == pytest.approx(a["accuracy"])
