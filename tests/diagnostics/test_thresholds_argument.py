"""``LayerScaleMonitor(model, thresholds={"ratio_max": 5})`` was accepted and raised ``AttributeError`` at the first
recorded step (in the middle of training); the diagnostics callback and the Lightning callback took it the same
way. A mapping of the fields now works as the object does; anything else is one line at construction."""

from __future__ import annotations

import pytest
import torch

from layerscale import create_model
from layerscale.diagnostics.alerts import AlertThresholds
from layerscale.diagnostics.callback import DiagnosticsCallback
from layerscale.diagnostics.monitor import LayerScaleMonitor


def _vit():
    torch.manual_seed(0)
    return create_model("vit", img_size=8, patch_size=4, in_chans=1, embed_dim=16, depth=2, num_heads=2,
                        num_classes=3)


def test_a_mapping_of_thresholds_is_the_same_as_the_object():
    assert AlertThresholds.of({"ratio_max": 5}) == AlertThresholds(ratio_max=5)
    assert AlertThresholds.of(None) == AlertThresholds()
    given = AlertThresholds(scale_collapse=0.5)
    assert AlertThresholds.of(given) is given
    monitor = LayerScaleMonitor(_vit(), thresholds={"ratio_max": 5, "scale_collapse": 0})
    assert monitor._alerts.thresholds == AlertThresholds(ratio_max=5, scale_collapse=0)
    assert DiagnosticsCallback(thresholds={"ratio_growth": 3}).thresholds == AlertThresholds(ratio_growth=3)


@pytest.mark.parametrize(("given", "message"), [
    ({"ratio_mx": 5}, r"diagnostics thresholds: unknown field\(s\) 'ratio_mx'; expected ratio_max, ratio_growth"),
    ({"ratio_max": -1}, r"diagnostics threshold ratio_max must be a number >= 0, got -1"),
    ([5], r"thresholds must be an AlertThresholds, a mapping of its fields or None, got list"),
    (5.0, r"thresholds must be an AlertThresholds, a mapping of its fields or None, got float"),
])
def test_anything_else_is_one_line_at_construction(given, message):
    for build in (lambda: LayerScaleMonitor(_vit(), thresholds=given), lambda: DiagnosticsCallback(thresholds=given)):
        with pytest.raises(ValueError, match=message) as info:
            build()
        assert "\n" not in str(info.value)
