"""``from_pretrained`` reads a folder someone else made: its ``config.json`` and ``model.safetensors`` were read
through symbolic links (a link to any file on the disk loaded it under the folder's name) and ``config.json`` whole,
at any size. A link is now refused in one line, except inside a Hugging Face Hub cache, whose snapshot files are
links into the repository's blobs (followed only to inside that repository's cache folder); ``config.json`` is read
bounded (8 MiB)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from layerscale.models import VisionTransformer
from layerscale.untrusted_files import MAX_CONFIG_BYTES, UntrustedFileError


def _saved(folder: Path) -> Path:
    torch.manual_seed(0)
    return VisionTransformer(img_size=8, patch_size=4, in_chans=1, num_classes=10, embed_dim=16, depth=2,
                             num_heads=2).save_pretrained(folder)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_link_inside_a_local_model_folder_is_refused(tmp_path, name):
    folder = _saved(tmp_path / "m")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / name).rename(elsewhere / name)
    (folder / name).symlink_to(elsewhere / name)
    with pytest.raises(UntrustedFileError, match=f"{folder / name}: refused \\(a symbolic link inside the model "
                                                 "folder\\); links are not followed"):
        VisionTransformer.from_pretrained(folder)


def test_an_oversized_config_is_refused_before_it_is_parsed(tmp_path):
    folder = _saved(tmp_path / "m")
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text(text[:-1] + ', "pad": "' + "x" * MAX_CONFIG_BYTES + '"}')
    with pytest.raises(UntrustedFileError, match=f"expected at most {MAX_CONFIG_BYTES} bytes"):
        VisionTransformer.from_pretrained(folder)


def _hub_cache(tmp_path: Path, folder: Path, outside: Path | None = None) -> Path:
    """A Hugging Face Hub cache as ``snapshot_download`` leaves it: ``models--me--vit/blobs/<hash>`` and
    ``snapshots/<revision>/<name>`` links to them (``outside``: ``model.safetensors`` links there instead)."""
    repo = tmp_path / "cache" / "models--me--vit"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for index, name in enumerate(("config.json", "model.safetensors")):
        blob = repo / "blobs" / f"blob{index}"
        shutil.copy(folder / name, blob)
        target = outside / name if outside is not None and name == "model.safetensors" else blob
        if outside is not None and name == "model.safetensors":
            shutil.copy(folder / name, target)
        (snapshot / name).symlink_to(os.path.relpath(target, snapshot))
    return snapshot


def test_a_hub_snapshot_follows_its_links_into_the_cache_only(tmp_path, monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    folder = _saved(tmp_path / "m")
    snapshot = _hub_cache(tmp_path, folder)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kwargs: str(snapshot))
    loaded = VisionTransformer.from_pretrained("me/vit")
    assert all(torch.equal(v, VisionTransformer.from_pretrained(folder).state_dict()[k])
               for k, v in loaded.state_dict().items())
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(tmp_path / "cache")
    snapshot = _hub_cache(tmp_path, folder, outside=outside)
    with pytest.raises(UntrustedFileError, match="a symbolic link inside the model folder, pointing out of the Hub "
                                                 "cache"):
        VisionTransformer.from_pretrained("me/vit")


@pytest.mark.parametrize("given", [None, 3, b"folder"])
def test_a_path_that_is_no_path_is_one_line(given, tmp_path):
    name = type(given).__name__
    with pytest.raises(ValueError, match=f"from_pretrained expects a folder or a Hub repo id, got {name}"):
        VisionTransformer.from_pretrained(given)
    model = VisionTransformer(img_size=8, patch_size=4, in_chans=1, num_classes=10, embed_dim=16, depth=1, num_heads=2)
    with pytest.raises(ValueError, match=f"save_pretrained expects a folder path, got {name}"):
        model.save_pretrained(given)
