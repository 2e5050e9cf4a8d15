"""A JSON config (``--config c.json``, a ``config.yaml`` written as JSON without pyyaml) or a ``--set`` value read
as JSON without pyyaml, that Python's JSON reader cannot hold — an integer past its int-string limit, nesting past
its recursion — is one line naming the file (or the ``--set`` value), never a ``RecursionError`` or an int-limit
message naming nothing."""

import json

import pytest

from layerscale.cli import main
from layerscale.train.config import config_file
from layerscale.train.config.config_file import parse_config_text, parse_scalar

BIG = "9" * 100_000
DEEP = "[" * 200_000 + "]" * 200_000


def test_a_json_config_with_a_huge_integer_names_the_file(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text('{"optim": {"lr": ' + BIG + "}}")
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{config}: refused (an integer of more than " in err, err[:500]
    assert "set_int_max_str_digits" not in err and not (tmp_path / "run").exists()


@pytest.fixture
def no_yaml(monkeypatch):
    monkeypatch.setattr(config_file, "_yaml", lambda: None)


@pytest.mark.parametrize("text, message", [
    (DEEP, r"^c\.yaml: nested more than 32 levels deep \(not a training config\)$"),
    ('{"optim": {"lr": ' + BIG + "}}", r"^c\.yaml: refused \(an integer of more than \d+ digits"),
])
def test_a_config_yaml_read_as_json_without_pyyaml_names_the_file(no_yaml, text, message):
    with pytest.raises(ValueError, match=message):
        parse_config_text(text, "c.yaml")


def test_a_config_yaml_read_as_json_without_pyyaml_still_reads(no_yaml):
    assert parse_config_text(json.dumps({"optim": {"lr": 0.001}}), "c.yaml") == {"optim": {"lr": 0.001}}
    with pytest.raises(ImportError, match="reading YAML needs pyyaml"):
        parse_config_text("optim: {lr: 1}", "c.yaml")


@pytest.mark.parametrize("value, message", [
    (DEEP, r"^--set value \[{120}\.\.\.\(400000 characters\): nested more than 32 levels deep$"),
    (BIG, r"^--set value 9{120}\.\.\.\(100000 characters\): refused \(an integer of more than \d+ digits"),
])
def test_a_set_value_read_as_json_without_pyyaml_names_the_value(no_yaml, value, message):
    with pytest.raises(ValueError, match=message):
        parse_scalar(value)


def test_set_values_read_as_json_without_pyyaml_are_as_before(no_yaml):
    assert parse_scalar("[0.9, 0.95]") == [0.9, 0.95]
    assert parse_scalar("48") == 48 and parse_scalar("abc") == "abc" and parse_scalar("true") is True
    assert parse_scalar("1e400") == float("inf")
