"""A run interrupted and resumed keeps the records of one never interrupted: the diagnostics warning state is in
the checkpoint, and TensorBoard keeps every point (one writer per process, so no purge erases another's points)."""

from __future__ import annotations

import pytest
from diagnostics_helpers import read_jsonl, tiny_config

from layerscale.diagnostics import AlertThresholds
from layerscale.diagnostics.alerts import WARNING_SPLIT, AlertTracker
from layerscale.train import Callback, run

STEPS = 12


class _CrashAt(Callback):
    """Stands in for a kill: the process dies after step ``step`` (after checkpoint ``step - step % 4``)."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, step):
        if step == self.step:
            raise KeyboardInterrupt


def _config(out_dir, tensorboard=False):
    config = tiny_config(out_dir, steps=STEPS, checkpoint_every_steps=4, log_every_steps=1, tensorboard=tensorboard)
    # ratio_max far below any ratio: every branch warns at step 1 and stays in the warned state
    config["diagnostics"] = {"enabled": True, "every": 2, "ratio_max": 1e-12}
    return config


def _warnings(run_dir):
    return [{k: v for k, v in r.items() if k not in ("time", "epoch")}
            for r in read_jsonl(run_dir / "metrics.jsonl") if r.get("split") == WARNING_SPLIT]


@pytest.fixture(scope="module")
def interrupted_and_uninterrupted(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume-records")
    tensorboard = pytest.importorskip("tensorboard") is not None
    run(_config(root / "straight", tensorboard))
    with pytest.raises(KeyboardInterrupt):
        run(_config(root / "resumed", tensorboard), callbacks=[_CrashAt(6)])
    run(resume=root / "resumed")
    return root / "straight", root / "resumed"


def test_resumed_run_records_the_same_warnings(interrupted_and_uninterrupted):
    straight, resumed = interrupted_and_uninterrupted
    expected = _warnings(straight)
    assert expected and {w["step"] for w in expected} == {1}  # raised once, at step 1, then kept active
    assert _warnings(resumed) == expected


def test_resumed_run_keeps_the_scale_reference_of_its_start(tmp_path):
    """scale_collapse compares against γ when the first run started, also after a resume from step 4, where the
    monitor is rebuilt from the checkpoint's γ (a tight threshold makes γ's drift in 12 steps trip it)."""
    def config(out_dir):
        config = tiny_config(out_dir, steps=STEPS, checkpoint_every_steps=4, log_every_steps=1)
        config["diagnostics"] = {"enabled": True, "every": 2, "ratio_max": 0, "ratio_growth": 0,
                                 "scale_collapse": 0.99}
        return config

    run(config(tmp_path / "straight"))
    with pytest.raises(KeyboardInterrupt):
        run(config(tmp_path / "resumed"), callbacks=[_CrashAt(6)])
    run(resume=tmp_path / "resumed")
    expected = _warnings(tmp_path / "straight")
    assert {w["kind"] for w in expected} == {"scale_collapse"} and max(w["step"] for w in expected) > 4
    assert _warnings(tmp_path / "resumed") == expected


def test_tensorboard_keeps_every_point_after_a_resume(interrupted_and_uninterrupted):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for run_dir in interrupted_and_uninterrupted:
        events = EventAccumulator(str(run_dir / "tensorboard"))
        events.Reload()
        assert [e.step for e in events.Scalars("train/loss")] == list(range(1, STEPS + 1)), run_dir.name
        assert [e.step for e in events.Scalars("diagnostics_ratio_attn/blocks.0")] == [1, *range(2, STEPS + 1, 2)]


def test_alert_state_round_trips_and_a_restored_tracker_does_not_warn_again():
    record = {"step": 2, "blocks": [{"name": "blocks.0", "attn": {"ratio": 50.0, "scale_mean": 0.01}}]}
    thresholds = AlertThresholds(ratio_max=10.0)
    original = AlertTracker(thresholds, {("blocks.0", "attn"): 1.0})
    assert {e["kind"] for e in original.check(record)} == {"ratio_explosion", "scale_collapse"}
    restored = AlertTracker(thresholds, {("blocks.0", "attn"): 0.02})  # a resumed run's "initial" value differs
    restored.load_state_dict(original.state_dict())
    later = {**record, "step": 4}
    assert restored.check(later) == original.check(later) == []
    with pytest.raises(ValueError, match="expected a diagnostics alert state"):
        restored.load_state_dict({"active": 3})


def test_ratio_growth_value_and_threshold_are_growth_factors():
    tracker = AlertTracker(AlertThresholds(ratio_max=0, ratio_growth=10.0, ratio_growth_min=0.1), {})
    tracker.check({"step": 1, "blocks": [{"name": "b", "mlp": {"ratio": 0.05}}]})
    (event,) = tracker.check({"step": 2, "blocks": [{"name": "b", "mlp": {"ratio": 1.0}}]})
    assert event["kind"] == "ratio_growth" and event["threshold"] == 10.0
    assert event["value"] == pytest.approx(20.0) and "grew x20" in event["message"]
