"""A diverging run stops naming the step and the first non-finite block, and its last good checkpoint is usable."""

import re
from pathlib import Path

import pytest
import torch
from torch import nn
from train_helpers import tiny_config

from layerscale.models import create_model
from layerscale.train import Callback, NonFiniteError, run
from layerscale.train.state.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from layerscale.train.records.metrics_log import read_metrics
from layerscale.train.nonfinite import locate_nonfinite

class _InfAtStep(Callback):
    """Makes the training forward of step ``step`` return inf logits (a transient blow-up), or, with ``weight``,
    fills that weight with ``value`` after step ``step - 1``."""

    def __init__(self, step, weight=None, value=float("inf")):
        self.step, self.weight, self.value = step, weight, value

    def on_train_start(self, trainer):
        def hook(module, args, out):
            if module.training and torch.is_grad_enabled() and trainer.state.step + 1 == self.step:
                return out * float("inf")
            return None

        if self.weight is None:
            trainer.model.register_forward_hook(hook)

    def on_step_end(self, trainer, step):
        if self.weight is not None and step == self.step - 1:
            with torch.no_grad():
                trainer.model.get_parameter(self.weight).fill_(self.value)


DIVERGING = tiny_config(optim={"max_steps": 10}, run={"checkpoint_every_steps": 2, "keep_checkpoints": 2})


def test_divergence_stops_naming_step_and_block_and_keeps_a_usable_checkpoint(tmp_path):
    with pytest.raises(NonFiniteError) as info:
        run(DIVERGING, out=tmp_path / "run", callbacks=[_InfAtStep(6, "blocks.1.mlp.fc2.bias")])
    message = str(info.value)
    match = re.search(r"non-finite (loss|gradient norm) at step (\d+) \(epoch 1\): first non-finite block output: "
                      r"blocks\.(\d+) \(its input was (finite|already non-finite)\); run stopped "
                      r"\(run\.on_nonfinite: stop\); last good checkpoint: (\S+)$", message)
    assert match, message
    step, block, last_good = int(match.group(2)), int(match.group(3)), Path(match.group(5))
    assert (step, block, match.group(4)) == (6, 1, "finite")
    assert info.value.step == 6
    assert last_good == latest_checkpoint(tmp_path / "run") and last_good.name == "step_00000004"
    weights, state = load_checkpoint(last_good)
    assert state["step"] == 4
    assert all(bool(torch.isfinite(t).all()) for t in weights.values())
    model = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=32, depth=2,
                         num_heads=2)
    model.load_state_dict(weights)  # the last good checkpoint loads into the model
    event = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r.get("event") == "nonfinite"]
    assert len(event) == 1 and event[0]["step"] == step and event[0]["action"] == "stop"


def test_finite_weights_whose_forward_overflows_are_not_checkpointed(tmp_path):
    with pytest.raises(NonFiniteError, match=r"the forward on a fixed batch is not finite after step 4; not "
                                             r"checkpointed; last good checkpoint: .*step_00000002$") as info:
        run(DIVERGING, out=tmp_path / "run", callbacks=[_InfAtStep(5, "pos_embed", 3e38)])
    assert info.value.step == 4
    assert [p.name for p in sorted((tmp_path / "run" / "checkpoints").iterdir())] == ["step_00000002"]


def test_skip_mode_drops_the_bad_updates_and_finishes(tmp_path):
    config = tiny_config(optim=DIVERGING["optim"], run={"on_nonfinite": "skip", "checkpoint_every_steps": 0})
    result = run(config, out=tmp_path / "run", callbacks=[_InfAtStep(3)])
    assert result.step == 10
    events = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r.get("event") == "nonfinite"]
    assert [(r["step"], r["action"]) for r in events] == [(3, "skip")]
    weights, _ = load_checkpoint(result.checkpoint)
    assert all(bool(torch.isfinite(t).all()) for t in weights.values())


def test_checkpoint_with_non_finite_weights_is_refused_and_nothing_is_written(tmp_path):
    with pytest.raises(FloatingPointError, match=r"refusing to checkpoint step 5: weight 'b' is not finite"):
        save_checkpoint(tmp_path, 5, {"a": torch.ones(2), "b": torch.tensor([1.0, float("nan")])}, {}, keep=2)
    assert list(tmp_path.iterdir()) == []


class _Poisoned(nn.Module):
    def forward(self, x):
        return x * float("inf")


def test_locate_names_the_first_block_and_whether_its_input_was_finite():
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=16, depth=3,
                         num_heads=2)
    model.blocks[1].mlp.fc2 = nn.Sequential(model.blocks[1].mlp.fc2, _Poisoned())
    report = locate_nonfinite(model, lambda: model(torch.randn(2, 1, 8, 8)))
    assert report.block_index == 1 and report.text == "first non-finite block output: blocks.1 (its input was finite)"
    with torch.no_grad():
        model.pos_embed.fill_(float("nan"))
    report = locate_nonfinite(model, lambda: model(torch.randn(2, 1, 8, 8)))
    assert report.text == "first non-finite block output: blocks.0 (its input was already non-finite)"


class _AlterCheckpoint(Callback):
    """After checkpoint ``step`` is written, rewrites its weights so that they stay finite but the forward
    overflows (as a file altered on disk would)."""

    def __init__(self, step):
        self.step = step

    def on_checkpoint(self, trainer, step, path):
        if step == self.step and path is not None:
            from layerscale.checkpoint_io import read_state_dict_file, save_safetensors_atomic

            loaded = read_state_dict_file(path / "model.safetensors")
            tensors = {**loaded.tensors, "pos_embed": torch.full_like(loaded.tensors["pos_embed"], 3e38)}
            save_safetensors_atomic(tensors, path / "model.safetensors", metadata=loaded.metadata)


def test_a_stop_names_the_newest_checkpoint_whose_weights_and_forward_are_finite(tmp_path):
    with pytest.raises(NonFiniteError, match=r"non-finite loss at step 6 .*last good checkpoint: .*step_00000002$"):
        run(DIVERGING, out=tmp_path / "run",
            callbacks=[_AlterCheckpoint(4), _InfAtStep(6, "blocks.1.mlp.fc2.bias")])
    assert (tmp_path / "run" / "checkpoints" / "step_00000004").is_dir()  # finite weights, but not good
