"""A JSONL ``--data-path`` line that Python's JSON reader cannot hold — nested deeper than its recursion limit, or an
integer literal longer than its int-string limit (4300 digits) — is refused in one ``ValueError`` naming the file
and the line number, never a ``RecursionError`` traceback or a message that names neither; on the command line
(``analyze``, ``prune``) that is one line and exit status 2, before anything is written."""

from __future__ import annotations

import pytest

from layerscale.cli import main
from layerscale.data.corpus_file import read_corpus

DEEP = "[" * 200_000 + "]" * 200_000
DEEP_FIELD = '{"text": ' + "[" * 200_000 + "]" * 200_000 + "}"
BIG_INT = '{"text": "a", "n": ' + "9" * 100_000 + "}"


def _write(path, bad_line):
    path.write_text('{"text": "first document"}\n' + bad_line + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("bad_line, words", [(DEEP, ["nested", "levels"]), (DEEP_FIELD, ["nested", "levels"]),
                                             (BIG_INT, ["digits"])], ids=["deep", "deep_field", "big_int"])
def test_a_line_json_cannot_hold_is_refused_naming_the_file_and_line(tmp_path, bad_line, words):
    path = _write(tmp_path / "data.jsonl", bad_line)
    with pytest.raises(ValueError) as exc:
        read_corpus(path)
    text = str(exc.value)
    assert "\n" not in text and str(path) in text and "line 2" in text, text
    assert all(word in text for word in words), text
    assert "set_int_max_str_digits" not in text, text  # a Python setting is no advice for a data file


def test_a_line_nested_within_the_limit_is_still_a_plain_refusal(tmp_path):
    path = _write(tmp_path / "data.jsonl", "[" * 50 + "]" * 50)
    with pytest.raises(ValueError, match=r"line 2 holds a list, expected a JSON object"):
        read_corpus(path)


def _gpt_folder(path):
    import torch

    from layerscale import create_model

    torch.manual_seed(0)
    create_model("gpt", vocab_size=256, block_size=32, embed_dim=16, depth=3, num_heads=2).save_pretrained(path)
    return path


@pytest.mark.parametrize("command", ["analyze", "prune"])
@pytest.mark.parametrize("bad_line", [DEEP, BIG_INT], ids=["deep", "big_int"])
def test_the_cli_refuses_it_in_one_line_with_status_2(tmp_path, capsys, command, bad_line):
    model = _gpt_folder(tmp_path / "gpt")
    data = _write(tmp_path / "deep.jsonl", bad_line)
    out = tmp_path / "out"
    extra = ["--no-progress", "--no-probes"] if command == "analyze" else ["--by", "gromov", "--remove", "1"]
    capsys.readouterr()
    assert main([command, str(model), "--data-path", str(data), "--seq-len", "16", "--samples", "4",
                 "--bootstrap", "20", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(data) in err and "line 2" in err, err
    assert not out.exists() or not any(out.iterdir())
