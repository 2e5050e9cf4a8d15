"""A value the model's constructor refuses is named as an error of the config's ``model`` section, led by the file
it came from, as a schema error is (audit 2026-12-07, section 10: ``layerscale train: error: init_value must be a
finite number >= 0, got '1e-5x' (str)`` named neither the key's section nor the file)."""

import json

import pytest

from layerscale.cli import main

MODEL = {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, "patch_size": 2}


def _config(tmp_path, **model) -> str:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"model": {**MODEL, **model}, "data": {"name": "digits"},
                                "optim": {"max_steps": 1}, "run": {"progress": "none"}}))
    return str(path)


@pytest.mark.parametrize(("model", "refusal"), [
    ({"init_value": "1e-5x"}, "init_value must be a finite number >= 0, got '1e-5x' (str)"),
    ({"drop_path_rate": -0.5}, "drop_path_rate must be a number in [0, 1), got -0.5"),
])
def test_a_constructor_refusal_names_the_file_and_the_model_section(tmp_path, capsys, model, refusal):
    config = _config(tmp_path, **model)
    assert main(["train", "--config", config, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == f"layerscale train: error: {config}: config key model: {refusal}\n"
    assert not (tmp_path / "run").exists()


def test_a_refused_value_given_with_set_is_not_blamed_on_the_file(tmp_path, capsys):
    config = _config(tmp_path)
    assert main(["train", "--config", config, "--set", "model.init_value=1e-5x", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == ("layerscale train: error: config key model: init_value must be a finite number >= 0, got '1e-5x' "
                   "(str)\n")
