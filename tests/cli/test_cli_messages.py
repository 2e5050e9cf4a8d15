""""Did you mean" hints, config keys without stray quotes, one name for the data location (``data.path`` /
``--data-path``), and no error message that suggests a flag no command has."""

import argparse
import ast
import re
from pathlib import Path

import pytest

from layerscale import create_model
from layerscale.cli import build_parser
from layerscale.residual import get_residual
from layerscale.suggest import did_you_mean
from layerscale.train.config.schema import TrainConfig

SRC = Path(__file__).resolve().parents[2] / "src" / "layerscale"


def test_did_you_mean_names_the_close_choices_only():
    assert did_you_mean("layerscal", ["layerscale", "prenorm"]) == " (did you mean layerscale?)"
    assert did_you_mean("zzz", ["layerscale", "prenorm"]) == ""
    assert did_you_mean(3, ["layerscale"]) == ""


@pytest.mark.parametrize(("call", "message"), [
    (lambda: create_model("vitt"), r"unknown model 'vitt' \(did you mean vit\?\); known models: "),
    (lambda: create_model("vit", dept=3), r"unknown argument\(s\) dept for model 'vit' \(did you mean depth\?\)"),
    (lambda: get_residual("layerscal"), r"unknown residual method 'layerscal' \(did you mean layerscale"),
    (lambda: TrainConfig.from_dict({"optim": {"lrr": 1.0}}), r"^unknown config key optim\.lrr \(did you mean lr\?\)"),
    (lambda: TrainConfig.from_dict({"model": {"name": "vit", "emb_dim": 8}}),
     r"^unknown config key model\.emb_dim for model 'vit' \(did you mean embed_dim\?\)"),
    (lambda: TrainConfig.from_dict({"run": {"device": "cuda:0"}}), r"'cuda:0' is not allowed \(did you mean cuda\?\)"),
    (lambda: TrainConfig.from_dict({"optimizer": {}}), r"^unknown config key optimizer \(did you mean optim\?\)"),
])
def test_unknown_names_get_a_suggestion_and_config_keys_no_quotes(call, message):
    with pytest.raises(ValueError, match=message) as info:  # config keys: optim.lrr, not optim.'lrr'
        call()
    assert "\n" not in str(info.value)


def _all_option_strings() -> set[str]:
    known: set[str] = set()
    for action in build_parser()._actions:
        known.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for sub_action in sub._actions:
                    known.update(sub_action.option_strings)
    return known


def test_no_error_message_suggests_a_flag_that_does_not_exist():
    known = _all_option_strings()
    flag = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
    unknown = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                for part in ast.walk(node.exc):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        unknown += [f"{path.relative_to(SRC)}:{node.lineno} {f}" for f in flag.findall(part.value)
                                    if f not in known]
    assert not unknown, unknown
    assert "--data-path" in known


def test_data_location_is_data_path_everywhere_and_data_dir_a_hidden_alias(capsys):
    from layerscale.study.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--data-dir", "d"]).data_path == "d"
    assert parser.parse_args(["--data-path", "d"]).data_path == "d"
    parser.print_help()
    shown = capsys.readouterr().out
    assert "--data-path" in shown and "--data-dir" not in shown
    for path in SRC.rglob("*.py"):
        assert "--data-dir DIR" not in path.read_text(encoding="utf-8"), path
