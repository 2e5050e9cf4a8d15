import json

import pytest
from train_helpers import REPO, tiny_config

from layerscale.train import TrainConfig
from layerscale.train.config.schema import iter_fields
from layerscale.train.config.config_file import apply_overrides, dotted_items, dump_config, load_config_file, parse_scalar

CONFIG_FILES = sorted((REPO / "src" / "layerscale" / "configs").glob("*.y*ml"))


def test_configs_folder_has_the_promised_examples():
    names = {p.stem for p in CONFIG_FILES}
    assert {"vit_digits", "deep_vit_fashion_mnist", "cait_cifar10", "gpt_text"} <= names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.name)
def test_every_example_config_validates(path):
    config = TrainConfig.from_dict(load_config_file(path))
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_defaults_fill_every_key_and_round_trip_through_yaml(tmp_path):
    config = TrainConfig.from_dict(tiny_config())
    assert config.optim.betas == (0.9, 0.999) and config.data.augment is True and config.run.on_nonfinite == "stop"
    path = tmp_path / "config.yaml"
    path.write_text(dump_config(config.to_dict()))
    assert TrainConfig.from_dict(load_config_file(path)) == config


def test_json_config_files_are_read(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(tiny_config(optim={"lr": 0.01})))
    assert TrainConfig.from_dict(load_config_file(path)).optim.lr == 0.01


@pytest.mark.parametrize("text, value", [
    ("48", 48), ("1e-3", 1e-3), ("5.0e-4", 5e-4), ("true", True), ("null", None), ("[0.9, 0.95]", [0.9, 0.95]),
    ("vit", "vit"), ("/data/fashion", "/data/fashion"),
])
def test_set_values_are_yaml_scalars(text, value):
    assert parse_scalar(text) == value


def test_yaml_exponent_floats_are_numbers(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  lr: 1e-3\n  min_lr: 0\n")
    assert TrainConfig.from_dict(load_config_file(path)).optim.lr == 1e-3


def test_dotted_overrides_reach_model_and_sections():
    raw = apply_overrides(tiny_config(), ["model.depth=4", "optim.lr=1e-4", "run.tensorboard=false"])
    config = TrainConfig.from_dict(raw)
    assert config.model.options["depth"] == 4 and config.optim.lr == 1e-4 and config.run.tensorboard is False


def test_dotted_items_is_the_inverse_of_the_overrides():
    raw = tiny_config()
    raw["model"]["extra"] = {"inner": [1, 2]}
    flat = dotted_items(raw)
    assert flat["model.extra.inner"] == [1, 2] and flat["optim.lr"] == raw["optim"]["lr"]
    assert all(isinstance(v, (list, str, int, float, bool, type(None))) for v in flat.values())
    rebuilt = apply_overrides({}, [f"{k}={json.dumps(v)}" for k, v in flat.items() if not isinstance(v, list)])
    assert dotted_items(rebuilt) == {k: v for k, v in flat.items() if not isinstance(v, list)}


@pytest.mark.parametrize("override", ["model.depth", "depth=4", ".x=1", "model..depth=1"])
def test_malformed_override_is_one_clear_error(override):
    with pytest.raises(ValueError, match="expected section.key=value"):
        apply_overrides(tiny_config(), [override])


@pytest.mark.parametrize("sections, message", [
    ({"optimizer": {}}, r"unknown config key optimizer \(did you mean optim\?\); allowed: model, data, optim, run"),
    ({"optim": {"lrr": 1.0}}, r"unknown config key optim\.lrr \(did you mean lr\?\); allowed in optim: .*\blr\b"),
    ({"model": {"name": "vit", "dept": 3}}, r"unknown config key model\.dept for model 'vit' \(did you mean depth\?\); allowed: .*depth"),
    ({"model": {"name": "vitt"}}, r"config key model\.name: unknown model 'vitt' \(did you mean vit\?\); allowed: .*cait"),
    ({"data": {"name": "imagenet"}}, r"config key data\.name: 'imagenet' is not allowed \(did you mean imagefolder\?\); allowed: digits"),
    ({"data": {"batch_size": "big"}}, r"config key data\.batch_size: expected int, got 'big' \(str\)"),
    ({"data": {"batch_size": 32.5}}, r"config key data\.batch_size: expected int, got 32\.5"),
    ({"data": {"augment": 1}}, r"config key data\.augment: expected bool, got 1 \(int\)"),
    ({"optim": {"lr": -1}}, r"config key optim\.lr: -1\.0 is out of range; allowed: > 0"),
    ({"optim": {"betas": [0.9, 1.0]}},
     r"config key optim\.betas: \[0\.9, 1\.0\] is out of range; allowed: in \[0, 1\)"),
    ({"optim": {"betas": 0.9}}, r"config key optim\.betas: expected a list of 2 numbers"),
    ({"optim": {"lr": 1e-4, "min_lr": 1e-3}}, r"optim\.min_lr: 0\.001 must be <= optim\.lr"),
    ({"run": {"on_nonfinite": "ignore"}}, r"run\.on_nonfinite: 'ignore' is not allowed; allowed: stop, skip"),
    ({"model": {"name": "vit", "depth": "deep"}}, r"config key model\.depth: expected int, got 'deep'"),
    ({"run": {"keep_checkpoints": 0}}, r"run\.keep_checkpoints: 0 is out of range; allowed: >= 1"),
])
def test_each_bad_key_or_value_is_one_error_naming_key_and_value(sections, message):
    raw = tiny_config()
    for name, values in sections.items():  # the model section is replaced whole, the others updated
        raw[name] = values if name == "model" else {**raw.get(name, {}), **values}
    with pytest.raises(ValueError, match=message) as info:
        TrainConfig.from_dict(raw)
    assert "\n" not in str(info.value)


def test_docs_describe_every_config_key():
    docs = (REPO / "docs" / "training.md").read_text()
    missing = [key for key, _, _ in iter_fields() if f"`{key}`" not in docs]
    assert not missing, f"docs/training.md does not describe {missing}"
    assert "`model.name`" in docs


def test_missing_config_file_and_bad_suffix(tmp_path):
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_config_file(tmp_path / "nope.yaml")
    (tmp_path / "c.toml").write_text("x = 1")
    with pytest.raises(ValueError, match="must end in .yaml, .yml or .json"):
        load_config_file(tmp_path / "c.toml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="must hold a mapping"):
        load_config_file(tmp_path / "list.yaml")

