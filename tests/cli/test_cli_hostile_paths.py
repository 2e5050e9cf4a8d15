"""Paths the system refuses or that are not regular files (issue 30, item 5): one line, exit status 2, nothing
written, and the path named as what it is — a name component longer than the file system allows, ``/proc/self/mem``
as a source, a FIFO (which would block or read as empty, and was reported as missing), a directory given as a
config (reported as "not found")."""

import os
from pathlib import Path

import pytest

from layerscale.cli import main

LONG = "y" * 300


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _refused(capsys, argv, command, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"layerscale {command}: error: "), err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize("argv", [
    ["convert", "{tmp}/" + LONG + ".safetensors", "{tmp}/out.safetensors", "--to", "timm_vit"],
    ["convert", "{tmp}/in.safetensors", "{tmp}/" + LONG + ".safetensors", "--to", "timm_vit"],
    ["fold", "{tmp}/" + LONG + ".safetensors", "{tmp}/out.safetensors"],
    ["fold", "{tmp}/in.safetensors", "{tmp}/" + LONG + "/out.safetensors"],
    ["train", "--config", "{tmp}/" + LONG + ".yaml", "--out", "{tmp}/run"],
    ["train", "--config", "{tmp}/c.json", "--out", "{tmp}/" + LONG],
    ["train", "--resume", "{tmp}/" + LONG],
    ["report", "{tmp}/" + LONG, "--out", "{tmp}/r.html"],
    ["study", "--preset", "demo", "--out", "{tmp}/" + LONG, "--dry-run"],
], ids=["convert-src", "convert-dst", "fold-src", "fold-dst", "train-config", "train-out", "train-resume",
        "report", "study"])
def test_a_name_too_long_for_the_file_system_is_one_line(tmp_path, capsys, argv):
    (tmp_path / "in.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (tmp_path / "c.json").write_text('{"model": {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, '
                                     '"patch_size": 2}}')
    before = _files(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    err = _refused(capsys, argv, argv[0], "File name too long", "the file system allows at most 255")
    assert "yyyyy...(" in err  # the path itself is cut, not printed whole
    assert _files(tmp_path) == before


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs /proc")
@pytest.mark.parametrize("command", [["convert", "--to", "timm_vit"], ["fold"]], ids=["convert", "fold"])
def test_proc_self_mem_as_a_source_is_named(tmp_path, capsys, command):
    _refused(capsys, [command[0], "/proc/self/mem", str(tmp_path / "out.safetensors"), *command[1:]], command[0],
             "/proc/self/mem is a file of the /proc or /sys pseudo file system, expected a weights file")
    assert _files(tmp_path) == []


def test_a_fifo_is_named_as_a_fifo_not_as_missing(tmp_path, capsys):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    for argv in (["convert", str(fifo), str(tmp_path / "o.safetensors"), "--to", "timm_vit"],
                 ["fold", str(fifo), str(tmp_path / "o.safetensors")]):
        _refused(capsys, argv, argv[0], f"{fifo} is a FIFO (named pipe), expected a weights file")
    _refused(capsys, ["report", str(fifo), "--out", str(tmp_path / "r.html")], "report",
             f"{fifo}: is a FIFO (named pipe); expected a run directory")
    _refused(capsys, ["train", "--resume", str(fifo)], "train", f"{fifo}: is a FIFO (named pipe); --resume takes")
    assert _files(tmp_path) == ["pipe.safetensors"]


def test_a_directory_as_config_is_named_as_a_directory(tmp_path, capsys):
    (tmp_path / "config.yaml").mkdir()
    _refused(capsys, ["train", "--config", str(tmp_path / "config.yaml"), "--out", str(tmp_path / "run")], "train",
             "config.yaml: is a directory; a config is a .yaml, .yml or .json file")
    assert _files(tmp_path) == ["config.yaml"]
