"""Fuzzing config trees (issue 30): any tree of YAML data — deep, wide, with integer or hostile keys, 400-digit
numbers, NaN, names with control characters — in a YAML or JSON file, a ``--set`` value, or a mapping passed from
Python, is either a valid :class:`TrainConfig` or exactly one ``ValueError`` with a printable, bounded message.
Never a ``RecursionError``, ``OverflowError``, ``TypeError`` or a megabyte line."""

import copy
import json

import pytest
import yaml
from fuzz_helpers import assert_safe_message, config_trees, nested
from hypothesis import example, given
from hypothesis import strategies as st

from layerscale.train.config.schema import TrainConfig
from layerscale.train.config.config_file import apply_overrides, load_config_file

TINY = {"model": {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, "patch_size": 4},
        "data": {"name": "digits", "batch_size": 32}, "optim": {"max_steps": 2}}
WHERE = [(), ("model",), ("data",), ("optim",), ("run",), ("diagnostics",)]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-config")


def _validate(load):
    try:
        config = TrainConfig.from_dict(load())
    except ValueError as exc:
        assert_safe_message(exc)
        return None
    assert isinstance(config, TrainConfig)
    return config


def _graft(tree, where, key):
    raw = copy.deepcopy(TINY)  # the tree itself is not copied: it may be nested beyond any recursion limit
    node = raw
    for part in where:
        node = node.setdefault(part, {})
    node[key] = tree
    return raw


@given(tree=config_trees, where=st.sampled_from(WHERE),
       key=st.sampled_from(["lr", "depth", "embed_dim", "mlp_ratio", "seed", "x", 1]))
@example(tree=10**400, where=("optim",), key="lr")
@example(tree=-1, where=("model",), key="mlp_ratio")
def test_a_grafted_tree_validates_or_is_one_line(work, tree, where, key):
    raw = _graft(tree, where, key)
    _validate(lambda: raw)  # a mapping passed from Python
    path = work / "c.yaml"
    try:
        path.write_text(yaml.safe_dump(raw))
    except (RecursionError, yaml.YAMLError):
        return  # the writer cannot write it; what it wrote is not a file the loader sees
    _validate(lambda: load_config_file(path))


@given(tree=config_trees)
def test_any_tree_as_the_whole_file_validates_or_is_one_line(work, tree):
    for name, dump in (("c.json", json.dumps), ("c.yaml", yaml.safe_dump)):
        try:
            text = dump(tree)
        except (TypeError, ValueError, RecursionError, yaml.YAMLError):
            continue  # JSON has no integer keys, no NaN in strict mode: not writable this way
        path = work / name
        path.write_text(text)
        _validate(lambda: load_config_file(path))


@given(value=st.one_of(config_trees.map(lambda t: yaml.safe_dump(t, default_flow_style=True).strip()),
                       st.text(max_size=30)),
       key=st.sampled_from(["optim.lr", "model.depth", "run.seed", "data.name", "model.x.y"]))
@example(value="[" * 5000 + "]" * 5000, key="optim.lr")
@example(value="9" * 5000, key="optim.lr")
def test_a_set_value_validates_or_is_one_line(value, key):
    _validate(lambda: apply_overrides(TINY, [f"{key}={value}"]))


@given(depth=st.integers(30, 40), anchors=st.integers(5, 9))
def test_alias_bombs_and_depth_are_bounded(work, depth, anchors):
    lines = ["model: {name: vit}", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, anchors)]
    lines.append("deep: " + "[" * depth + "]" * depth)
    path = work / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        load_config_file(path)
    assert_safe_message(info.value)


def test_a_tree_nested_beyond_the_recursion_limit_is_one_line(work):
    """(Not through Hypothesis, which pretty-prints its examples recursively.)"""
    raw = _graft(nested(20000), ("optim",), "lr")
    with pytest.raises(ValueError, match=r"nested more than 32 levels deep at optim\.lr") as info:
        TrainConfig.from_dict(raw)
    assert_safe_message(info.value)
    path = work / "deep.json"
    path.write_text('{"optim": {"lr": ' + "[" * 20000 + "]" * 20000 + "}}")
    with pytest.raises(ValueError, match="nested more than 32 levels deep") as info:
        load_config_file(path)
    assert_safe_message(info.value)
