"""Fuzzing the PyTorch-file reader: random pickles (protocols 0-5) with and without payloads, torch.save zip
containers (valid, truncated, mutated, with payloads), and the training-checkpoint reader."""

import pickle

import pytest
import torch
from fuzz_helpers import (
    Payload, assert_state_dict, check_loads_or_refuses, payload_pickle, plain_objects, state_dicts, torch_save_bytes,
)
from hypothesis import example, given
from hypothesis import strategies as st

from layerscale.checkpoint_io import read_state_dict_file
from layerscale.train.state.checkpoint import MODEL_FILE, STATE_FILE, load_checkpoint

protocols = st.integers(0, pickle.HIGHEST_PROTOCOL)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-pickle")


@given(obj=plain_objects, protocol=protocols)
def test_random_plain_pickles_load_or_refuse(work, obj, protocol):
    path = work / "plain.pt"
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    assert check_loads_or_refuses(read_state_dict_file, path, work / "marker") is None  # no tensors: refused


@given(how=st.sampled_from(["open", "system", "eval"]), protocol=protocols, nested=st.booleans(),
       container=st.sampled_from(["raw", "zip"]))
def test_payloads_never_run(work, how, protocol, nested, container):
    marker = work / "marker"
    path = work / "payload.pt"
    if container == "raw":
        path.write_bytes(payload_pickle(marker, how, protocol, nested))
    else:
        obj = Payload(marker, how)
        path.write_bytes(torch_save_bytes({"model": {"w": torch.zeros(2), "x": obj}} if nested else obj))
    assert check_loads_or_refuses(read_state_dict_file, path, marker) is None


@given(state_dict=state_dicts, wrap=st.sampled_from([None, "model", "state_dict", "other"]))
def test_valid_torch_save_files_load_exactly(work, state_dict, wrap):
    path = work / "valid.pt"
    path.write_bytes(torch_save_bytes(state_dict if wrap is None else {wrap: state_dict, "epoch": 3}))
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if wrap == "other":
        assert result is None
        return
    assert_state_dict(result)
    assert set(result.tensors) == set(state_dict)
    assert all(torch.equal(result.tensors[k], v) for k, v in state_dict.items())


@given(state_dict=state_dicts, data=st.data())
def test_truncated_and_mutated_zip_containers_load_or_refuse(work, state_dict, data):
    _mutated_zip(work, state_dict, data)


def test_mutated_zip_found_by_the_deep_profile(work):
    """A one-bit change in data.pkl made the weights-only unpickler raise KeyError (now one ValueError)."""
    blob = bytearray(torch_save_bytes({"0": torch.tensor(15.41), "000000": torch.tensor(15.41)}))
    blob[247] ^= 8
    path = work / "found.pt"
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="truncated or corrupt PyTorch file"):
        read_state_dict_file(path)


def test_zip_of_an_unknown_version_found_by_the_deep_profile(work):
    """A zip whose central directory asks for extract version 6.4 made zipfile raise NotImplementedError."""
    blob = bytearray(torch_save_bytes({"w": torch.zeros(2)}))
    central = blob.index(b"PK\x01\x02")
    blob[central + 6:central + 8] = (64).to_bytes(2, "little")
    path = work / "version.pt"
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="truncated or corrupt PyTorch file"):
        read_state_dict_file(path)


def _mutated_zip(work, state_dict, data):
    blob = bytearray(torch_save_bytes(state_dict))
    if data.draw(st.booleans(), label="truncate"):
        blob = blob[:data.draw(st.integers(0, len(blob) - 1), label="cut")]
    else:
        for position, xor in data.draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)),
                                                min_size=1, max_size=8), label="flips"):
            blob[position % len(blob)] ^= xor
    path = work / "mutated.pt"
    path.write_bytes(bytes(blob))
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if result is not None:
        assert_state_dict(result)


@given(blob=st.binary(max_size=256), prefix=st.sampled_from([b"", b"PK\x03\x04", b"\x80\x02", b"\x80\x05"]))
# found by the deep profile: the weights-only unpickler raised IndexError / KeyError on these opcode streams
@example(blob=b"q\x00", prefix=b"\x80\x02")
@example(blob=b"h\x00", prefix=b"\x80\x02")
@example(blob=b"\x87", prefix=b"\x80\x02")
@example(blob=b"\x81", prefix=b"\x80\x02")
@example(blob=b"r", prefix=b"\x80\x02")
def test_random_bytes_are_refused(work, blob, prefix):
    path = work / "random.bin"
    path.write_bytes(prefix + blob)
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if result is not None:
        assert_state_dict(result)


@given(obj=st.one_of(plain_objects, st.builds(lambda sd: {"format": "layerscale.train_state", "version": 1, **sd},
                                               st.dictionaries(st.text(max_size=5), plain_objects, max_size=3))),
       cut=st.one_of(st.none(), st.integers(0, 4000)), payload=st.booleans())
def test_training_checkpoint_reader_loads_or_refuses(work, obj, cut, payload):
    checkpoint = work / "step_00000001"
    checkpoint.mkdir(exist_ok=True)
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(checkpoint / MODEL_FILE))
    blob = torch_save_bytes(Payload(work / "marker", "open") if payload else obj)
    (checkpoint / STATE_FILE).write_bytes(blob if cut is None else blob[:cut])
    result = check_loads_or_refuses(load_checkpoint, checkpoint, work / "marker")
    if result is not None:
        weights, state = result
        assert set(weights) == {"w"} and isinstance(state, dict)
