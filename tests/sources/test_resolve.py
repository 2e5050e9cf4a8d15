"""The one resolver: each kind of source is recognised and read with its library, the tokenizer folder found, and
links, ``--config`` on a folder and non-finite weights refused in one line."""

from __future__ import annotations

import pytest
import torch

from layerscale import create_model
from layerscale.sources import read_source

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")

from source_models import gpt2, hf_folder, timm_folder, timm_vit  # noqa: E402


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_each_folder_kind_is_read_with_its_library(tmp_path):
    ours = create_model("gpt", vocab_size=256, block_size=16, embed_dim=16, depth=2, num_heads=2)
    ours.save_pretrained(tmp_path / "ours")
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer_config.json").write_text("{}")
    hf = gpt2(64)
    for name, folder, library, model, has_tokenizer in (
            ("ours", tmp_path / "ours", "layerscale", ours, False),
            ("timm", timm_folder(tmp_path / "timm", timm_vit()), "timm", None, False),
            ("hf", hf_folder(tmp_path / "hf", hf, tokenizer), "transformers", hf, True),
            ("sharded", hf_folder(tmp_path / "sharded", hf, None, shard="20KB"), "transformers", hf, False)):
        found = read_source(folder)
        assert found.library == library and found.run is None, name
        assert (found.tokenizer == folder) is has_tokenizer, name
        assert not found.model.training
        if model is not None:
            assert _same(found.model.state_dict(), model.state_dict()), name
    assert read_source(tmp_path / "ours").is_language_model and not read_source(tmp_path / "timm").is_language_model


def test_links_config_on_a_folder_and_nan_weights_are_refused(tmp_path):
    folder = hf_folder(tmp_path / "hf", gpt2(64), None)
    (tmp_path / "link").symlink_to(folder)
    with pytest.raises(ValueError, match="symbolic link; links are not followed"):
        read_source(tmp_path / "link")
    with pytest.raises(ValueError, match="--config is for a weights file"):
        read_source(folder, config=tmp_path / "x.yaml")
    (folder / "config.json").rename(tmp_path / "config.json")
    (folder / "config.json").symlink_to(tmp_path / "config.json")
    with pytest.raises(ValueError, match="symbolic link inside the model folder"):
        read_source(folder)
    broken = gpt2(64)
    with torch.no_grad():
        broken.transformer.h[1].attn.c_attn.bias[3] = float("inf")
    hf_folder(tmp_path / "inf", broken, None)
    with pytest.raises(ValueError, match=r"'transformer\.h\.1\.attn\.c_attn\.bias' holds 1 NaN or infinite"):
        read_source(tmp_path / "inf")
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        read_source(tmp_path / "missing")


def test_a_hub_cache_snapshot_is_refused_with_the_way_to_real_files(tmp_path, capsys):
    from layerscale.cli import main

    folder = hf_folder(tmp_path / "saved", gpt2(64), None)
    repo = tmp_path / "hub" / "models--someone--tiny-gpt2"
    snapshot = repo / "snapshots" / "0123abcd"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for index, file in enumerate(sorted(folder.iterdir())):  # huggingface_hub's layout: links into blobs/
        blob = repo / "blobs" / f"blob{index}"
        file.rename(blob)
        (snapshot / file.name).symlink_to(f"../../blobs/{blob.name}")
    with pytest.raises(ValueError, match="symbolic link inside the model folder.*Hub cache snapshot.*hf download "
                                         "someone/tiny-gpt2 --local-dir DIR"):
        read_source(snapshot)
    capsys.readouterr()
    assert main(["analyze", str(snapshot), "--data-path", str(tmp_path / "any.txt"), "--out",
                 str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err.strip()
    assert "cp -rL" in err and "\n" not in err
    (snapshot.parent / "elsewhere").mkdir()  # the same links outside the cache layout: no hint
    for link in snapshot.iterdir():
        (snapshot.parent / "elsewhere" / link.name).symlink_to(link.resolve())
    moved = tmp_path / "plain"
    (snapshot.parent / "elsewhere").rename(moved)
    with pytest.raises(ValueError, match="links are not followed$"):
        read_source(moved)
