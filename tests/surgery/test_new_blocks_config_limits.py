""":func:`layerscale.surgery.growth.new_blocks.read_new_blocks` reads a model folder's ``config.json`` with the
project's hostile-file reader (:mod:`layerscale.untrusted_files`): a file nested deeper than Python's JSON reader
recurses, or holding an integer literal past Python's int-string limit, is refused in one ``ValueError`` naming the
file — never a ``RecursionError``; a plain config without the key still reads as ``None``, one with it as the
indices."""

from __future__ import annotations

import json

import pytest

from layerscale.surgery.growth.new_blocks import NEW_BLOCKS_KEY, read_new_blocks


@pytest.mark.parametrize("content", ['{"a": ' + "[" * 200_000 + "]" * 200_000 + "}",
                                     '{"n": ' + "9" * 100_000 + "}"], ids=["deep", "big_int"])
def test_a_config_json_python_cannot_hold_is_refused_in_one_line(tmp_path, content):
    (tmp_path / "config.json").write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        read_new_blocks(tmp_path)
    text = str(exc.value)
    assert "\n" not in text and str(tmp_path / "config.json") in text, text


def test_a_plain_config_reads_as_before(tmp_path):
    assert read_new_blocks(tmp_path) is None
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    assert read_new_blocks(tmp_path) is None
    (tmp_path / "config.json").write_text(json.dumps({NEW_BLOCKS_KEY: [1, 3]}), encoding="utf-8")
    assert read_new_blocks(tmp_path) == (1, 3)
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_new_blocks(tmp_path)
