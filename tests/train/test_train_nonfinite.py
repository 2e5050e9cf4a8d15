"""A diverging run stops naming the step and the first non-finite block, and its last good checkpoint is usable."""

import re
from pathlib import Path

import pytest
import torch
from torch import nn
from train_helpers import tiny_config

from layerscale.models import create_model
from layerscale.train import NonFiniteError, run
from layerscale.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from layerscale.train.metrics_log import read_metrics
from layerscale.train.nonfinite import locate_nonfinite

# Adam's first update moves every weight by about lr: 1e20 leaves finite but enormous weights after step 1, and the
# next forward overflows. No weight decay: AdamW would multiply the weights by (1 - lr·wd) and make them inf at once.
DIVERGING = tiny_config(optim={"lr": 1e20, "min_lr": 0.0, "weight_decay": 0.0, "warmup_steps": 0, "max_steps": 10},
                        run={"checkpoint_every_steps": 1, "keep_checkpoints": 2})


def test_divergence_stops_naming_step_and_block_and_keeps_a_usable_checkpoint(tmp_path):
    with pytest.raises(NonFiniteError) as info:
        run(DIVERGING, out=tmp_path / "run")
    message = str(info.value)
    match = re.search(r"non-finite (loss|gradient norm) at step (\d+) \(epoch 1\): first non-finite block output: "
                      r"blocks\.(\d+) \(its input was (finite|already non-finite)\); run stopped "
                      r"\(run\.on_nonfinite: stop\); last good checkpoint: (\S+)$", message)
    assert match, message
    step, last_good = int(match.group(2)), Path(match.group(5))
    assert step >= 2 and last_good == latest_checkpoint(tmp_path / "run")
    weights, state = load_checkpoint(last_good)
    assert state["step"] == step - 1
    assert all(bool(torch.isfinite(t).all()) for t in weights.values())
    model = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=32, depth=2,
                         num_heads=2)
    model.load_state_dict(weights)  # the last good checkpoint loads into the model
    event = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r.get("event") == "nonfinite"]
    assert len(event) == 1 and event[0]["step"] == step and event[0]["action"] == "stop"


def test_skip_mode_drops_the_bad_updates_and_finishes(tmp_path):
    config = tiny_config(optim=DIVERGING["optim"], run={"on_nonfinite": "skip", "checkpoint_every_steps": 0})
    result = run(config, out=tmp_path / "run")
    assert result.step == 10
    events = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r.get("event") == "nonfinite"]
    assert events and all(r["action"] == "skip" for r in events)
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
