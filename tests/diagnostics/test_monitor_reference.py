"""The ``scale_collapse`` reference is each branch's ``mean|γ|`` when monitoring starts — the loaded weights when
training starts from them (``run.init_from``, a grown model, a fine-tuned checkpoint) — not the value the layers
were built with; a resumed run keeps the first run's reference."""

from __future__ import annotations

import pytest
import torch
from diagnostics_helpers import read_jsonl, tiny_config

from layerscale import create_model, grow
from layerscale.diagnostics import LayerScaleMonitor
from layerscale.diagnostics.alerts import WARNING_SPLIT
from layerscale.surgery.model_files import write_model_folder
from layerscale.train import run

MODEL = dict(img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=32, num_heads=2)


def _vit(depth: int = 2, init_value: float = 1e-5):
    torch.manual_seed(0)
    return create_model("vit", depth=depth, init_value=init_value, **MODEL)


def _set_scales(model, value: float) -> None:
    with torch.no_grad():
        for block in model.blocks:
            block.ls1.gamma.fill_(value)
            block.ls2.gamma.fill_(value)


def _collapses(monitor: LayerScaleMonitor, step: int, model) -> list[dict]:
    """The ``scale_collapse`` events of one recorded forward at ``step``."""
    monitor.begin_step(step)
    model(torch.randn(2, 1, 8, 8))
    monitor.end_step()
    return [r for r in monitor.records if r["split"] == WARNING_SPLIT and r["step"] == step
            and r["kind"] == "scale_collapse"]


def test_a_branch_starting_at_zero_has_no_collapse_check():
    model = _vit()  # built at 1e-5; then γ = 0, as in a grown model's new blocks
    _set_scales(model, 0.0)
    monitor = LayerScaleMonitor(model, every=1)
    assert _collapses(monitor, 1, model) == []  # nothing to fall from
    assert _collapses(monitor, 2, model) == []
    _set_scales(model, 0.3)
    assert _collapses(monitor, 3, model) == []
    _set_scales(model, 0.0)  # back to zero: still no reference to compare against
    assert _collapses(monitor, 4, model) == []


def test_the_reference_is_the_loaded_scale_not_the_built_one():
    source = _vit(init_value=0.5)
    model = _vit(init_value=1e-5)
    model.load_state_dict(source.state_dict())  # fine-tuning: γ = 0.5 loaded into layers built at 1e-5
    monitor = LayerScaleMonitor(model, every=1)
    _set_scales(model, 0.2)
    assert _collapses(monitor, 1, model) == []  # 0.4 of the loaded value: above 0.1 ×
    _set_scales(model, 0.04)
    events = _collapses(monitor, 2, model)
    assert len(events) == 4  # two blocks, two branches each
    assert all(e["threshold"] == pytest.approx(0.05) and e["value"] == pytest.approx(0.04) for e in events)
    assert "0.1 x 0.5, its value when monitoring started" in events[0]["message"]


def test_a_restored_alert_state_keeps_the_first_runs_reference():
    model = _vit(init_value=0.5)
    first = LayerScaleMonitor(model, every=1)
    _set_scales(model, 0.2)  # the weights a resumed run starts from
    resumed = LayerScaleMonitor(model, every=1)
    resumed.load_alert_state(first.alert_state())
    _set_scales(model, 0.04)  # below 0.1 × 0.5, above 0.1 × 0.2
    assert [e["threshold"] for e in _collapses(resumed, 1, model)] == pytest.approx([0.05] * 4)


def test_training_a_grown_model_from_init_from_raises_no_collapse_warning(tmp_path):
    """``layerscale grow`` inserts blocks at γ = 0; the run built at init_value 0.1 loads them (run.init_from)."""
    source = _vit(depth=2, init_value=0.1)
    write_model_folder(grow(source, 2, where="every:1"), "layerscale", tmp_path / "grown",
                       surgery={"operation": "grow"})
    config = tiny_config(tmp_path / "run", depth=4, steps=3, init_from=str(tmp_path / "grown"))
    config["diagnostics"] = {"enabled": True, "every": 1}
    run(config)
    records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    first = next(r for r in records if r["split"] == "diagnostics" and r["step"] == 1)
    new_blocks = ("blocks.1", "blocks.3")
    assert [first["blocks"][i][b]["scale_mean"] for i in (1, 3) for b in ("attn", "mlp")] == [0.0] * 4
    assert [b["name"] for b in first["blocks"]][1::2] == list(new_blocks)
    collapses = [r for r in records if r["split"] == WARNING_SPLIT and r["kind"] == "scale_collapse"]
    assert collapses == []
