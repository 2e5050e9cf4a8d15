"""The trainer callback: records land in metrics.jsonl (and TensorBoard), a config section builds it."""

from __future__ import annotations

import pytest
from diagnostics_helpers import train_tiny

from layerscale.diagnostics import AlertThresholds
from layerscale.diagnostics.callback import DiagnosticsCallback
from layerscale.diagnostics.records import tensorboard_scalars


def test_tensorboard_scalars_are_written(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train_tiny(tmp_path / "tb", steps=2, tensorboard=True)
    files = list((tmp_path / "tb" / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) == 1  # one writer per process: the trainer's scalars and the diagnostics share it
    events = EventAccumulator(str(files[0]))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"diagnostics_ratio_attn/blocks.0", "diagnostics_scale_mean_mlp/blocks.2", "diagnostics_stream_rms/blocks.1",
            "diagnostics_grad_norm/blocks.0", "diagnostics_update_ratio/blocks.2"} <= tags
    assert [e.step for e in events.Scalars("diagnostics_ratio_attn/blocks.0")] == [1, 2]


def test_tensorboard_tags_of_a_record():
    record = {"blocks": [{"name": "blocks.0", "stream_rms": 1.5, "grad_norm": None, "update_ratio": 0.01,
                          "attn": {"ratio": 0.2, "scale_mean": None}, "mlp": {"ratio": 0.3, "scale_mean": 0.1}}]}
    assert tensorboard_scalars(record) == {
        "diagnostics_stream_rms/blocks.0": 1.5, "diagnostics_update_ratio/blocks.0": 0.01,
        "diagnostics_ratio_attn/blocks.0": 0.2, "diagnostics_ratio_mlp/blocks.0": 0.3,
        "diagnostics_scale_mean_mlp/blocks.0": 0.1}


def test_built_from_a_config_section():
    assert DiagnosticsCallback.from_settings({"enabled": False, "every": 10}) is None
    callback = DiagnosticsCallback.from_settings({"every": 10, "ratio_max": 3.0, "track_updates": False})
    assert callback.every == 10 and not callback.track_updates
    assert callback.thresholds == AlertThresholds(ratio_max=3.0)

    class Section:  # the trainer's frozen dataclass works the same way (attributes)
        enabled, every, scale_collapse = True, 7, 0.5

    callback = DiagnosticsCallback.from_settings(Section())
    assert callback.every == 7 and callback.thresholds.scale_collapse == 0.5
    with pytest.raises(ValueError, match="diagnostics every must be a positive int"):
        DiagnosticsCallback.from_settings({"every": 0})
