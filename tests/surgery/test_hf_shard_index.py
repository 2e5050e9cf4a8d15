"""A sharded Hugging Face checkpoint's index is checked before transformers joins its shard names to the folder
(:mod:`layerscale.surgery.hf.shard_index`): only bare names of files in the folder, so an index cannot load weights
from elsewhere on the disk (the CLI's refusal is in tests/analysis/test_source_refusals.py)."""

from __future__ import annotations

import json

import pytest

from layerscale.surgery.hf.shard_index import MAX_INDEX_BYTES, checked_shard_names
from layerscale.untrusted_files import UntrustedFileError


def _folder(tmp_path, weight_map, index="model.safetensors.index.json", shards=("a.safetensors",)):
    folder = tmp_path / "model"
    folder.mkdir()
    for name in shards:
        (folder / name).write_bytes(b"x")
    (folder / index).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def test_bare_names_of_files_in_the_folder_are_read_sorted_and_distinct(tmp_path):
    folder = _folder(tmp_path, {"w1": "b.safetensors", "w2": "a.safetensors", "w3": "b.safetensors"},
                     shards=("a.safetensors", "b.safetensors"))
    assert checked_shard_names(folder) == {"model.safetensors.index.json": ["a.safetensors", "b.safetensors"]}
    assert checked_shard_names(tmp_path) == {}  # no index: not sharded


@pytest.mark.parametrize("name", ["/etc/passwd", "../a.safetensors", "sub/a.safetensors", "..\\a.safetensors",
                                  "C:a.safetensors", "..", ".", "", 3, None, "a\x00.safetensors"])
def test_a_name_that_is_not_a_bare_file_name_is_refused(tmp_path, name):
    folder = _folder(tmp_path, {"w": "a.safetensors", "lm_head.weight": name}, index="pytorch_model.bin.index.json")
    with pytest.raises(UntrustedFileError, match="expected the bare name of a shard file in the same folder") as info:
        checked_shard_names(folder)
    assert "pytorch_model.bin.index.json: weight 'lm_head.weight'" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_shard_and_a_malformed_index_are_one_line(tmp_path):
    folder = _folder(tmp_path, {"w": "gone.safetensors"})
    with pytest.raises(UntrustedFileError, match="names the shard 'gone.safetensors', which is not a file in"):
        checked_shard_names(folder)
    for content in ({"weight_map": []}, {"weight_map": {}}, {}):
        (folder / "model.safetensors.index.json").write_text(json.dumps(content))
        with pytest.raises(UntrustedFileError, match='expected a JSON object with a non-empty "weight_map"'):
            checked_shard_names(folder)
    (folder / "model.safetensors.index.json").write_text("[1, 2]")
    with pytest.raises(UntrustedFileError, match="model.safetensors.index.json"):
        checked_shard_names(folder)


def test_an_index_over_the_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import layerscale.surgery.hf.shard_index as shard_index

    folder = _folder(tmp_path, {"w": "a.safetensors"})
    monkeypatch.setattr(shard_index, "MAX_INDEX_BYTES", 10)
    with pytest.raises(UntrustedFileError, match="expected at most 10 bytes"):
        checked_shard_names(folder)
    assert MAX_INDEX_BYTES >= 1 << 20


def test_a_hub_snapshot_of_links_into_its_cache_is_read(tmp_path):
    """huggingface_hub's snapshot folders hold links to its blobs: the index and shards are followed there."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "1").write_text(json.dumps({"weight_map": {"w": "a.safetensors"}}))
    (blobs / "2").write_bytes(b"x")
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "model.safetensors.index.json").symlink_to(blobs / "1")
    (snapshot / "a.safetensors").symlink_to(blobs / "2")
    assert checked_shard_names(snapshot) == {"model.safetensors.index.json": ["a.safetensors"]}


def test_the_layerscale_loader_refuses_an_index_pointing_outside(tmp_path):
    transformers = pytest.importorskip("transformers")
    from layerscale.surgery.hf.hf_loader import from_pretrained_with_layerscale

    config = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "model", max_shard_size="20KB")
    index = tmp_path / "model" / "model.safetensors.index.json"
    content = json.loads(index.read_text())
    (tmp_path / "elsewhere").mkdir()
    for name in set(content["weight_map"].values()):
        (tmp_path / "model" / name).rename(tmp_path / "elsewhere" / name)
    content["weight_map"] = {k: str(tmp_path / "elsewhere" / v) for k, v in content["weight_map"].items()}
    index.write_text(json.dumps(content))
    with pytest.raises(UntrustedFileError, match="expected the bare name of a shard file"):
        from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path / "model")
