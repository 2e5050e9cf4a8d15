"""Every named study is a valid design whose runs are valid training configs (no data needed)."""

from pathlib import Path

import pytest

from layerscale.study.design.presets import PRESETS, get_preset
from layerscale.train.config.schema import TrainConfig


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_valid_run_configs(name):
    spec = get_preset(name).spec
    assert spec.reference_method in spec.methods
    for method, depth in spec.cells():
        for kind, seed in (("tune", spec.tune_seed), ("final", spec.seeds[0])):
            run = spec.run(Path("/tmp/study"), method, depth, spec.shared_lr, seed, kind)
            config = TrainConfig.from_dict(run.config)
            assert config.model.options["residual"] == method and config.model.options["depth"] == depth


@pytest.mark.parametrize("name", ["fashion", "lm"])
def test_committed_studies_have_three_seeds_and_a_tuned_learning_rate(name):
    spec = get_preset(name).spec
    assert len(spec.seeds) >= 3 and spec.tuned and spec.validation_fraction > 0


def test_get_preset_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="unknown study preset 'magic'; known presets: deep1000, demo, fashion, lm"):
        get_preset("magic")
