"""Defects found by outside testing: crafted safetensors headers, unwritable destinations, a folder as SRC and
torch's pickle-protocol warning all end in one line (ValueError; exit 2 on the CLI) with nothing written."""

import json
import pickle
import struct

import pytest
import torch

from layerscale.checkpoint_io import read_state_dict_file, save_safetensors_atomic
from layerscale.cli import main
from layerscale.interop import load_pretrained_into
from layerscale.models import create_model

pytest.importorskip("safetensors")


def _safetensors_with_header(path, header_bytes: bytes, body: bytes = b"\0" * 16):
    path.write_bytes(struct.pack("<Q", len(header_bytes)) + header_bytes + body)
    return path


CRAFTED = {
    "offsets [0]": json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}).encode(),
    "offsets 'xyz'": json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": "xyz"}}).encode(),
    "deep JSON": b"[" * 100_000 + b"]" * 100_000,
    "deep JSON object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "entry not an object": json.dumps({"w": [1, 2]}).encode(),
    "negative shape": json.dumps({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}).encode(),
    "unknown dtype": json.dumps({"w": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}).encode(),
    "span does not match shape": json.dumps({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode(),
    "huge declared size": json.dumps({"w": {"dtype": "F32", "shape": [2**40, 2**40],
                                            "data_offsets": [0, 2**82]}}).encode(),
    "metadata not strings": json.dumps({"__metadata__": {"a": 1}}).encode(),
    "boolean offsets": json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [False, True]}}).encode(),
    "integer with 5000 digits": b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 8]}}',
}


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_safetensors_header_is_one_value_error(tmp_path, name):
    path = _safetensors_with_header(tmp_path / "w.safetensors", CRAFTED[name])
    with pytest.raises(ValueError) as info:
        read_state_dict_file(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(ValueError):
        load_pretrained_into(create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=1, num_heads=2), path)


@pytest.mark.parametrize("command", ["convert", "fold"])
@pytest.mark.parametrize("name", ["offsets [0]", "offsets 'xyz'", "deep JSON object"])
def test_crafted_header_on_the_cli_is_one_line_exit_2(tmp_path, capsys, command, name):
    path = _safetensors_with_header(tmp_path / "w.safetensors", CRAFTED[name])
    dst = tmp_path / "out.safetensors"
    assert main([command, str(path), str(dst)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "corrupt safetensors header" in err
    assert not dst.exists()


def test_a_folder_given_as_src_is_named(tmp_path, capsys):
    assert main(["convert", str(tmp_path), str(tmp_path / "out.safetensors")]) == 2
    assert f"{tmp_path} is a directory, expected a weights file" in capsys.readouterr().err


def test_protocol_4_pickle_refusal_keeps_stderr_to_one_line(tmp_path, capfd):
    path = tmp_path / "p4.pt"
    path.write_bytes(pickle.dumps({"w": 1}, protocol=4))
    assert main(["convert", str(path), str(tmp_path / "out.safetensors")]) == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Warning" not in err


@pytest.fixture
def weights(tmp_path):
    path = tmp_path / "ours.safetensors"
    save_safetensors_atomic(create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=1,
                                         num_heads=2).state_dict(), path)
    return path


def _unwritable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return {
        "under a regular file": (blocker / "out.safetensors", "is a file, not a folder"),
        "in /proc": ("/proc/layerscale-test.safetensors", "does not accept new files"),
        "in /sys": ("/sys/layerscale-test.safetensors", "does not accept new files"),
        "missing folder": (tmp_path / "no" / "such" / "out.safetensors", "does not exist"),
    }


@pytest.mark.parametrize("command", ["convert", "fold"])
@pytest.mark.parametrize("case", ["under a regular file", "in /proc", "in /sys", "missing folder"])
def test_unwritable_destination_is_one_line_exit_2_and_nothing_is_written(tmp_path, capsys, weights, command, case):
    dst, reason = _unwritable(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([command, str(weights), str(dst)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(dst) in err[0] and reason in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root writes into read-only folders")
def test_read_only_folder_is_refused(tmp_path, capsys, weights):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert main(["convert", str(weights), str(folder / "out.safetensors")]) == 2
        assert "does not accept new files (Permission denied)" in capsys.readouterr().err
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def test_existing_file_weights_roundtrip_still_work(tmp_path, weights):
    dst = tmp_path / "copy.safetensors"
    assert main(["convert", str(weights), str(dst)]) == 0
    assert set(read_state_dict_file(dst).tensors) == set(read_state_dict_file(weights).tensors)
    copied, original = read_state_dict_file(dst).tensors, read_state_dict_file(weights).tensors
    assert torch.equal(copied["cls_token"], original["cls_token"])
