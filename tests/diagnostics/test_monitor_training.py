"""Through ``layerscale.train.run``: the records in metrics.jsonl equal statistics recomputed by hand from the model
at the same step (weights before the step, the step's own batch), with the residual arithmetic written out here."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from diagnostics_helpers import diagnostics_by_step, read_jsonl, train_tiny

from layerscale import create_model
from layerscale.train import Callback

CHECKED_STEP = 4  # monitored (every=2), after three updates: the scales have moved away from their init


class CaptureStep(Callback):
    """Keeps the weights before step ``step``, its batch, and the weights after it."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_start(self, trainer) -> None:
        if self.step == 1:
            self.before = copy.deepcopy(trainer.model.state_dict())

    def on_step_end(self, trainer, step: int) -> None:
        if step == self.step - 1:
            self.before = copy.deepcopy(trainer.model.state_dict())
        if step == self.step:
            self.batch = tuple(t.clone() for t in trainer.batch)
            self.after = copy.deepcopy(trainer.model.state_dict())


def _norm(t: torch.Tensor) -> float:
    return t.double().pow(2).sum().sqrt().item()


def hand_statistics(model, x: torch.Tensor) -> list[dict]:
    """Per block: ratio ‖γ⊙F(LN(h))‖/‖h‖ per branch, mean/max |γ|, RMS of the stream after the block."""
    h = model.patch_embed(x)
    h = torch.cat((model.cls_token.expand(h.shape[0], -1, -1), h + model.pos_embed), dim=1)
    out = []
    for block in model.blocks:
        stats = {}
        for i, (branch, fn) in enumerate((("attn", block.attn), ("mlp", block.mlp)), start=1):
            norm, ls = getattr(block, f"norm{i}"), getattr(block, f"ls{i}")
            s = fn(norm(h))
            if ls is not None:
                s = s * ls.gamma
            stats[branch] = {"ratio": _norm(s) / _norm(h),
                             "scale_mean": None if ls is None else ls.gamma.abs().mean().item(),
                             "scale_max": None if ls is None else ls.gamma.abs().max().item()}
            h = h + s
        stats["stream_rms"] = math.sqrt(h.double().pow(2).mean().item())
        out.append(stats)
    return out


@pytest.mark.parametrize("step", [1, CHECKED_STEP])
def test_records_match_hand_computation(tmp_path, step):
    capture = CaptureStep(step)
    train_tiny(tmp_path / "run", callbacks=(capture,), device="cpu")  # the hand computation is on the CPU
    record = diagnostics_by_step(tmp_path / "run")[step]

    model = create_model("vit", img_size=8, in_chans=1, num_classes=10, embed_dim=32, depth=3, num_heads=2,
                         patch_size=2, init_value=0.1)
    model.load_state_dict(capture.before)
    model.train()
    x, y = capture.batch
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()  # grad_clip is 0 in the tiny config: the optimizer sees these
    expected = hand_statistics(model, x)

    assert [b["name"] for b in record["blocks"]] == ["blocks.0", "blocks.1", "blocks.2"]
    for b, (got, want, block) in enumerate(zip(record["blocks"], expected, model.blocks)):
        for branch in ("attn", "mlp"):
            assert got[branch]["ratio"] == pytest.approx(want[branch]["ratio"], rel=1e-4)
            assert got[branch]["scale_mean"] == pytest.approx(want[branch]["scale_mean"], rel=1e-6)
            assert got[branch]["scale_max"] == pytest.approx(want[branch]["scale_max"], rel=1e-6)
        assert got["stream_rms"] == pytest.approx(want["stream_rms"], rel=1e-4)
        grads = [p.grad for p in block.parameters()]
        assert got["grad_norm"] == pytest.approx(math.sqrt(sum(_norm(g) ** 2 for g in grads)), rel=1e-4)
        prefix = f"blocks.{b}."
        keys = [k for k in capture.before if k.startswith(prefix)]
        delta = math.sqrt(sum(_norm(capture.after[k] - capture.before[k]) ** 2 for k in keys))
        weight = math.sqrt(sum(_norm(capture.before[k]) ** 2 for k in keys))
        assert got["update_ratio"] == pytest.approx(delta / weight, rel=1e-4)
    if step == CHECKED_STEP:  # the check is not vacuous: the scales have left their initial value
        assert any(abs(b["attn"]["scale_max"] - 0.1) > 1e-3 for b in record["blocks"])


def test_records_every_k_steps_and_at_step_one(trained_runs):
    records = read_jsonl(trained_runs["layerscale"] / "metrics.jsonl")
    steps = [r["step"] for r in records if r["split"] == "diagnostics"]
    assert steps == [1, 2, 4, 6]
    train_steps = [r["step"] for r in records if r["split"] == "train"]
    assert train_steps == [2, 4, 6]  # the trainer's own records are untouched


def test_prenorm_records_ratio_without_scale(trained_runs):
    record = diagnostics_by_step(trained_runs["prenorm"])[2]
    for block in record["blocks"]:
        for branch in ("attn", "mlp"):
            assert block[branch]["scale_kind"] is None and block[branch]["scale_mean"] is None
            assert block[branch]["ratio"] > 0
        assert block["stream_rms"] > 0 and block["grad_norm"] > 0 and block["update_ratio"] > 0
