"""Crafted config files (issue 30, item 3): each is one line, exit status 2, and nothing written — never a
``RecursionError``, ``OverflowError``, ``TypeError``, a traceback from deep inside a layer, or a megabyte "line"."""

import json

import pytest
from train_helpers import tiny_config

from layerscale.cli import main

BOMB = ("model: {name: vit}\nrun:\n  progress: [&a [l,l,l,l,l,l,l,l,l], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], "
        "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], &e [*d,*d,*d,*d,*d,*d,*d,*d,*d], "
        "&f [*e,*e,*e,*e,*e,*e,*e,*e,*e], &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]]\n")


def _nested(levels):
    value = 1
    for _ in range(levels):
        value = [value]
    return value


def _json(**sections):
    return json.dumps(tiny_config(**sections))


CONFIGS = [
    ("deep json", "c.json", "[" * 20000 + "]" * 20000, r"c\.json: nested more than 32 levels deep"),
    ("deep yaml", "c.yaml", "a: " + "[" * 20000 + "]" * 20000, r"c\.yaml: nested more than 32 levels deep"),
    ("deep but parseable", "c.json", json.dumps({"model": {"name": "vit", "x": _nested(40)}}),
     r"c\.json: nested more than 32 levels deep at model\.x"),
    ("400-digit lr", "c.json", _json(optim={"lr": int("9" * 400)}),
     r"config key optim\.lr: expected number, got 9{18}\.\.\.9{19} \(int\)"),
    ("5000-digit int in yaml", "c.yaml", "optim: {lr: " + "9" * 5000 + "}\n", r"c\.yaml: not a valid YAML value"),
    ("mixed int and str keys", "c.yaml", "model: {name: vit}\n1: 2\nzzz: 3\n",
     r"c\.yaml: key 1 in <top> is of type int; config keys are strings"),
    ("int key in a section", "c.yaml", "model: {name: vit, 7: 2, depth: 2}\n",
     r"key 7 in model is of type int; config keys are strings"),
    ("negative mlp_ratio", "c.json", _json(model={"mlp_ratio": -1}),
     r"mlp_ratio must be a finite number > 0, got -1\.0"),
    ("zero mlp_ratio", "c.json", _json(model={"mlp_ratio": 0.001}), r"mlp_ratio must be a number > 0"),
    ("embed_dim 1e8", "c.json", _json(model={"embed_dim": 10**8, "num_heads": 1}),
     r"embed_dim must be at most 65536 \(this library's limit\), got 100000000"),
    ("mlp_ratio 1e12", "c.json", _json(model={"mlp_ratio": 1e12}),
     r"mlp_ratio 1000000000000\.0 gives an MLP hidden width .* more than 262144 \(this library's limit\)"),
    ("mlp_ratio 1000", "c.json", _json(model={"mlp_ratio": 1000, "embed_dim": 256, "num_heads": 1, "depth": 500}),
     r"model 'vit': [0-9,]+ parameters; training it needs at least .* GiB .* more than this machine's"),
    ("embed_dim as a float", "c.json", _json(model={"embed_dim": 1e8}),
     r"config key model\.embed_dim: expected int, got 100000000\.0 \(float\)"),
    ("alias bomb", "c.yaml", BOMB, r"c\.yaml: holds more than 10,000 values \(YAML aliases are counted"),
    ("a huge unknown key", "c.json", json.dumps({"model": {"name": "vit"}, "optim": {"x" * 200_000: 1}}),
     r"unknown config key optim\.x{120}\.\.\.\(200000 characters\)"),
    ("a key with a newline and ANSI escape", "c.json",
     json.dumps({"model": {"name": "vit"}, "run": {"seed\n\x1b[31mERROR": 1}}),
     r"unknown config key run\.seed\\n\\x1b\[31mERROR"),
]


@pytest.mark.parametrize("case", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_crafted_config_is_one_line_status_2_and_writes_nothing(tmp_path, capsys, case):
    _, name, text, message = case
    import re

    config = tmp_path / name
    config.write_text(text)
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("layerscale train: error: ") and len(err) < 2100, err[:3000]
    assert "\x1b" not in err
    assert re.search(message, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.parametrize("value, message", [
    ("[" * 5000 + "]" * 5000, r"--set value \[{120}\.\.\.\(10000 characters\): nested more than 32 levels deep"),
    ("9" * 5000, r"--set value 9{120}\.\.\.\(5000 characters\): not a valid YAML value"),
    ("{1: 2}", r"--set value \{1: 2\}: key 1 in <top> is of type int"),
])
def test_crafted_set_value_is_one_line(tmp_path, capsys, value, message):
    import re

    config = tmp_path / "c.json"
    config.write_text(_json())
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "run"), "--set", f"optim.lr={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err[:3000]
    assert not (tmp_path / "run").exists()


def test_a_directory_or_a_fifo_as_config_is_named_as_what_it_is(tmp_path, capsys):
    import os

    (tmp_path / "dir.yaml").mkdir()
    os.mkfifo(tmp_path / "pipe.yaml")
    assert main(["train", "--config", str(tmp_path / "dir.yaml"), "--out", str(tmp_path / "run")]) == 2
    assert "dir.yaml: is a directory; a config is a .yaml, .yml or .json file" in capsys.readouterr().err
    assert main(["train", "--config", str(tmp_path / "pipe.yaml"), "--out", str(tmp_path / "run")]) == 2
    assert "pipe.yaml: is a FIFO (named pipe)" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
