"""Fuzzing the safetensors reader: valid files, mutated headers and bodies, truncations, huge declared sizes."""

import pytest
import torch
from fuzz_helpers import (
    assert_state_dict, check_loads_or_refuses, entries, header_json, headers, safetensors_bytes, state_dicts,
    with_header,
)
from hypothesis import given
from hypothesis import strategies as st

from layerscale.checkpoint_io import read_state_dict_file

pytest.importorskip("safetensors")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-safetensors")


@given(state_dict=state_dicts)
def test_valid_files_load_exactly(work, state_dict):
    path = work / "valid.safetensors"
    path.write_bytes(safetensors_bytes(state_dict))
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if result is None:  # only an unusable state dict (e.g. all-empty names) may be refused
        return
    assert_state_dict(result)
    assert set(result.tensors) == set(state_dict)
    for key, tensor in state_dict.items():
        assert result.tensors[key].dtype == tensor.dtype and torch.equal(result.tensors[key], tensor)


@given(state_dict=state_dicts, data=st.data())
def test_truncated_files_are_refused_at_every_length(work, state_dict, data):
    blob = safetensors_bytes(state_dict)
    cut = data.draw(st.sampled_from([0, 1, 7, 8, 9, len(blob) // 2, len(blob) - 1])
                    | st.integers(0, len(blob) - 1))
    path = work / "truncated.safetensors"
    path.write_bytes(blob[:cut])
    has_data = any(t.numel() for t in state_dict.values())
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if has_data or cut < len(blob) - 1:
        assert result is None, f"a file cut at {cut} of {len(blob)} bytes loaded"


@given(state_dict=state_dicts, flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1,
                                               max_size=6))
def test_mutated_bytes_load_or_refuse(work, state_dict, flips):
    blob = bytearray(safetensors_bytes(state_dict))
    for position, xor in flips:
        blob[position % len(blob)] ^= xor
    path = work / "mutated.safetensors"
    path.write_bytes(bytes(blob))
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if result is not None:
        assert_state_dict(result)


@given(header=headers, body=st.binary(max_size=64))
def test_random_headers_load_or_refuse(work, header, body):
    path = work / "header.safetensors"
    path.write_bytes(with_header(header_json(header), body))
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if result is not None:
        assert_state_dict(result)


@given(entry=entries, body=st.binary(max_size=64),
       declared=st.one_of(st.none(), st.integers(0, 2**64 - 1), st.sampled_from([2**63, 2**64 - 1, 10**8 + 1])))
def test_single_entry_and_declared_lengths(work, entry, body, declared):
    path = work / "entry.safetensors"
    path.write_bytes(with_header(header_json({"w": entry}), body, declared))
    result = check_loads_or_refuses(read_state_dict_file, path, work / "marker")
    if result is not None:
        assert_state_dict(result)


@given(depth=st.integers(1, 200_000), opener=st.sampled_from([b"[", b'{"a":']))
def test_deeply_nested_headers_are_refused(work, depth, opener):
    closer = b"]" if opener == b"[" else b"}"
    path = work / "deep.safetensors"
    path.write_bytes(with_header(b"{" + b'"x":' + opener * depth + b"1" + closer * depth + b"}", b""))
    assert check_loads_or_refuses(read_state_dict_file, path, work / "marker") is None
