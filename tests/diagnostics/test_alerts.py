"""Warnings: a branch ratio that explodes or jumps, a scale that collapses — logged once, as a JSONL event too."""

from __future__ import annotations

import logging
import math

import pytest
import torch
from diagnostics_helpers import read_jsonl, tiny_config

from layerscale import create_model
from layerscale.diagnostics import AlertThresholds, LayerScaleMonitor
from layerscale.diagnostics.alerts import LOGGER_NAME, AlertTracker
from layerscale.diagnostics.records import json_safe, restore_numbers


def record(step: int, ratio: float | None, scale: float | None = 0.1) -> dict:
    return {"split": "diagnostics", "step": step,
            "blocks": [{"name": "blocks.0", "attn": {"ratio": ratio, "scale_mean": scale}, "mlp": None}]}


def kinds(events) -> list[str]:
    return [e["kind"] for e in events]


def test_ratio_explosion_is_reported_once_until_it_clears(caplog):
    tracker = AlertTracker(AlertThresholds(ratio_max=5.0, ratio_growth=0), {})
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        assert tracker.check(record(1, 1.0)) == []
        first = tracker.check(record(2, 7.5))
        assert kinds(first) == ["ratio_explosion"]
        assert first[0] | {"message": None} == {"split": "diagnostics_warning", "step": 2, "block": "blocks.0",
                                               "branch": "attn", "kind": "ratio_explosion", "value": 7.5,
                                               "threshold": 5.0, "message": None}
        assert tracker.check(record(3, 9.0)) == []  # still exploded: no repeat
        assert tracker.check(record(4, 1.0)) == []
        assert kinds(tracker.check(record(5, math.inf))) == ["ratio_explosion"]  # non-finite counts too
    assert [r.getMessage() for r in caplog.records] == [
        "step 2: blocks.0 attn branch: branch-to-stream ratio 7.5 exceeds 5",
        "step 5: blocks.0 attn branch: branch-to-stream ratio inf exceeds 5"]


def test_growth_is_reported_only_for_non_negligible_branches():
    tracker = AlertTracker(AlertThresholds(ratio_max=0, ratio_growth=10.0, ratio_growth_min=0.1), {})
    assert tracker.check(record(1, 1e-6)) == []
    assert tracker.check(record(2, 1e-3)) == []  # x1000, but still negligible: LayerScale growing in
    assert tracker.check(record(3, 0.05)) == []
    events = tracker.check(record(4, 0.6))  # x12 and now 0.6
    assert kinds(events) == ["ratio_growth"] and "grew x12" in events[0]["message"]


def test_scale_collapse_relative_to_init():
    tracker = AlertTracker(AlertThresholds(scale_collapse=0.1), {("blocks.0", "attn"): 1e-4})
    assert tracker.check(record(1, 0.01, scale=2e-5)) == []
    events = tracker.check(record(2, 0.01, scale=5e-6))
    assert kinds(events) == ["scale_collapse"] and events[0]["threshold"] == pytest.approx(1e-5)
    zero_init = AlertTracker(AlertThresholds(), {("blocks.0", "attn"): 0.0})  # ReZero: starts at 0 on purpose
    assert zero_init.check(record(1, 0.0, scale=0.0)) == []


@pytest.mark.parametrize("name", ["ratio_max", "ratio_growth", "ratio_growth_min", "scale_collapse"])
@pytest.mark.parametrize("value", [-1.0, math.nan, "10", True])
def test_bad_thresholds_are_clear_errors(name, value):
    with pytest.raises(ValueError, match=f"diagnostics threshold {name} must be a number >= 0"):
        AlertThresholds(**{name: value})


def test_monitor_warns_on_a_real_collapse_and_explosion():
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=32, depth=2,
                         num_heads=2, init_value=0.1)
    monitor = LayerScaleMonitor(model, every=1, thresholds=AlertThresholds(ratio_max=3.0))
    with torch.no_grad():
        model.blocks[0].ls1.gamma.fill_(1e-4)  # collapsed: 1e-3 of its initial 0.1
        model.blocks[1].mlp.fc2.weight.mul_(1e4)  # the MLP branch now dwarfs the stream
        model.blocks[1].ls2.gamma.fill_(1.0)
    monitor.begin_step(0)
    model(torch.randn(2, 1, 8, 8))
    monitor.end_step()
    events = [r for r in monitor.records if r["split"] == "diagnostics_warning"]
    assert {(e["block"], e["branch"], e["kind"]) for e in events} == {
        ("blocks.0", "attn", "scale_collapse"), ("blocks.1", "mlp", "ratio_explosion")}


def test_warnings_reach_metrics_jsonl(tmp_path):
    """A training run whose thresholds are tight enough to trip writes the warning events into metrics.jsonl."""
    from layerscale.train import run

    config = tiny_config(tmp_path / "run", steps=2)
    config["diagnostics"] = {"every": 1, "ratio_max": 1e-4}
    run(config)
    events = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if r["split"] == "diagnostics_warning"]
    assert events and {e["kind"] for e in events} == {"ratio_explosion"}
    assert all(e["step"] == 1 for e in events)  # reported once, not again at step 2


def test_non_finite_values_round_trip_through_json():
    value = {"a": [math.nan, 1.0, {"b": -math.inf}], "c": math.inf, "d": "text"}
    safe = json_safe(value)
    assert safe == {"a": ["nan", 1.0, {"b": "-inf"}], "c": "inf", "d": "text"}
    back = restore_numbers(safe)
    assert math.isnan(back["a"][0]) and back["a"][2]["b"] == -math.inf and back["c"] == math.inf


def test_tiny_run_without_problems_raises_no_warning(trained_runs):
    records = read_jsonl(trained_runs["layerscale"] / "metrics.jsonl")
    assert not [r for r in records if r["split"] == "diagnostics_warning"]
