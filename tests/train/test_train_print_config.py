"""``layerscale train --print-config``: defaults without ``--config``, model values checked, and a choice key's
type error listing the allowed values (item 8 of issue 28)."""

import pytest

from layerscale.cli import main
from layerscale.train.config.schema import TrainConfig


def test_print_config_without_a_config_shows_the_defaults(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "name: vit" in out and "name: digits" in out and "compile: 'off'" in out
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_print_config_with_overrides_of_the_defaults(capsys):
    assert main(["train", "--print-config", "--set", "model.depth=3", "--set", "optim.lr=0.01"]) == 0
    out = capsys.readouterr().out
    assert "depth: 3" in out and "lr: 0.01" in out


@pytest.mark.parametrize(("override", "message"), [
    ("model.depth=0", "config key model: depth must be"),
    ("model.num_heads=5", "config key model: "),
    ("model.residual=layerscal", "did you mean layerscale"),
])
def test_print_config_checks_model_values(capsys, override, message):
    assert main(["train", "--print-config", "--config", "vit_digits", "--set", override]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_a_boolean_for_a_choice_key_lists_the_allowed_values(capsys):
    assert main(["train", "--print-config", "--set", "run.compile=yes"]) == 2
    err = capsys.readouterr().err.strip()
    assert "run.compile: expected str, got True (bool)" in err
    assert "yes / no / on / off" in err and err.endswith("allowed: off, regional, auto")
    with pytest.raises(ValueError, match=r"allowed: ddp, fsdp$"):
        TrainConfig.from_dict({"run": {"strategy": 3}})
