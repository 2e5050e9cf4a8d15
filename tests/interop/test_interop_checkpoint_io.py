"""Weight files: safe reading by content (never a full unpickle), clear errors, atomic safetensors writing."""

import collections
import os

import pytest
import torch

from layerscale.checkpoint_io import (
    load_state_dict_file, read_state_dict_file, save_safetensors_atomic, sniff_weights_format,
)

pytest.importorskip("safetensors")


@pytest.fixture
def tensors():
    gen = torch.Generator().manual_seed(0)
    return {"a.weight": torch.randn(3, 4, generator=gen), "a.bias": torch.randn(3, generator=gen),
            "steps": torch.tensor(7, dtype=torch.int64)}


def assert_same(got, expected):
    assert got.keys() == expected.keys()
    for key in expected:
        assert torch.equal(got[key], expected[key]) and got[key].dtype == expected[key].dtype, key


def test_safetensors_round_trip_with_metadata(tmp_path, tensors):
    path = save_safetensors_atomic(tensors, tmp_path / "w.safetensors", metadata={"note": "x"})
    loaded = read_state_dict_file(path)
    assert_same(loaded.tensors, tensors)
    assert loaded.file_format == "safetensors" and loaded.metadata == {"format": "pt", "note": "x"}
    assert sorted(os.listdir(tmp_path)) == ["w.safetensors"]  # no temporary file left behind


@pytest.mark.parametrize("container", [None, "model", "state_dict"])
@pytest.mark.parametrize("legacy", [False, True])
def test_pytorch_files_are_read_by_content_whatever_their_name(tmp_path, tensors, container, legacy):
    obj = tensors if container is None else {container: tensors, "epoch": 3, "args": {"lr": 0.1}}
    path = tmp_path / "weights.safetensors"  # a misleading extension: the content decides
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    assert sniff_weights_format(path) == "pytorch"
    loaded = read_state_dict_file(path)
    assert_same(loaded.tensors, tensors)
    assert loaded.container == container


def test_safetensors_with_a_pt_name_is_read_as_safetensors(tmp_path, tensors):
    path = save_safetensors_atomic(tensors, tmp_path / "w.pt")
    assert sniff_weights_format(path) == "safetensors"
    assert_same(load_state_dict_file(path), tensors)


def test_aliased_tensors_are_saved(tmp_path):
    base = torch.arange(12.0).reshape(6, 2)
    q, k, v = base.chunk(3)
    save_safetensors_atomic({"q": q, "k": k, "v": v, "t": base.t()}, tmp_path / "x.safetensors")
    got = load_state_dict_file(tmp_path / "x.safetensors")
    assert torch.equal(got["k"], k) and torch.equal(got["t"], base.t())


class NotATensor:
    pass


def test_arbitrary_python_objects_are_never_unpickled(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": {"w": torch.ones(1)}, "hook": NotATensor()}, path)
    with pytest.raises(ValueError, match=r"refusing to unpickle"):
        load_state_dict_file(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no such weights file: .*absent\.pt"):
        load_state_dict_file(tmp_path / "absent.pt")


@pytest.mark.parametrize("content", [b"", b"hello world, not weights", b"\x89PNG\r\n\x1a\n0000"])
def test_foreign_files_are_refused(tmp_path, content):
    path = tmp_path / "f.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"is not a safetensors or PyTorch weights file"):
        load_state_dict_file(path)


def test_truncated_safetensors(tmp_path, tensors):
    path = save_safetensors_atomic(tensors, tmp_path / "w.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(ValueError, match=r"truncated safetensors file: its tensors need"):
        load_state_dict_file(path)
    path.write_bytes(data[:20])
    with pytest.raises(ValueError, match=r"truncated safetensors file: its header says"):
        load_state_dict_file(path)


def test_truncated_pytorch_file(tmp_path, tensors):
    path = tmp_path / "w.pt"
    torch.save(tensors, path)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"truncated or corrupt PyTorch file"):
        load_state_dict_file(path)


@pytest.mark.parametrize("obj, message", [
    (torch.ones(3), r"holds a Tensor, expected a dict of tensors"),
    ({}, r"holds an empty dict"),
    ({"epoch": 3, "model": {"w": 1}}, r"is not a state dict: .*non-tensors \[epoch, model\]"),
])
def test_files_without_a_state_dict(tmp_path, obj, message):
    path = tmp_path / "x.pt"
    torch.save(obj, path)
    with pytest.raises(ValueError, match=message):
        load_state_dict_file(path)


def test_failed_save_leaves_the_existing_file_untouched(tmp_path, tensors):
    path = save_safetensors_atomic(tensors, tmp_path / "w.safetensors")
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"must map str to Tensor"):
        save_safetensors_atomic({"ok": torch.ones(1), "bad": [1, 2]}, path)
    with pytest.raises(ValueError, match=r"metadata must map str to str"):
        save_safetensors_atomic(tensors, path, metadata={"n": 1})
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["w.safetensors"]


def test_save_into_a_missing_directory(tmp_path, tensors):
    with pytest.raises(FileNotFoundError, match=r"directory of .* does not exist"):
        save_safetensors_atomic(tensors, tmp_path / "nope" / "w.safetensors")


def test_ordered_dict_state_dicts_are_accepted(tmp_path, tensors):
    save_safetensors_atomic(collections.OrderedDict(tensors), tmp_path / "w.safetensors")
    assert_same(load_state_dict_file(tmp_path / "w.safetensors"), tensors)


def test_numpy_npz_is_not_mistaken_for_a_pytorch_zip(tmp_path):
    np = pytest.importorskip("numpy")
    path = tmp_path / "ViT-B_16.npz"
    np.savez(path, weight=np.ones(3))
    with pytest.raises(ValueError, match=r"zip archive but not a PyTorch checkpoint"):
        load_state_dict_file(path)
