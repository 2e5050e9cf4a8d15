"""Bad inputs found by a sweep of ``convert`` / ``fold`` / ``grow`` / ``analyze`` / ``report`` / ``demo``: each is
one line ``layerscale <cmd>: error: ...`` naming the file or value, exit status 2, and nothing written."""

import json
import time
from pathlib import Path

import pytest

from layerscale.cli import main
from layerscale.models.validation import check_patch
from layerscale.models.vit import VisionTransformer


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _refused(capsys, argv, command, *needles):
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"layerscale {command}: error: "), err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def model_folder(tmp_path):
    """One of our model folders (save_pretrained) of a two-block ViT."""
    folder = tmp_path / "model"
    VisionTransformer(img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=16, depth=2,
                      num_heads=2).save_pretrained(folder)
    return folder


def test_an_absurd_img_size_in_a_model_config_is_one_line_naming_it(tmp_path, capsys, model_folder):
    config = json.loads((model_folder / "config.json").read_text())
    config["img_size"] = 10**12  # torch's own error was a multi-kB message with a C++ stack ("frame #0: c10")
    (model_folder / "config.json").write_text(json.dumps(config))
    before = _files(tmp_path)
    err = _refused(capsys, ["grow", model_folder, "--insert", "1", "--out", tmp_path / "grown"], "grow",
                   "config.json", "img_size", str(10**12))
    assert "Exception raised from" not in err and "frame #" not in err
    assert _files(tmp_path) == before


def test_an_absurd_img_size_not_divisible_by_the_patch_is_refused_at_once():
    start = time.perf_counter()  # listing the allowed patch sizes of 10**12 + 1 looped 10**12 times
    with pytest.raises(ValueError, match="img_size"):
        check_patch(10**12 + 1, 2)
    assert time.perf_counter() - start < 1


def test_a_truncated_model_safetensors_in_a_model_folder_names_the_file(tmp_path, capsys, model_folder):
    weights = model_folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    before = _files(tmp_path)
    _refused(capsys, ["grow", model_folder, "--insert", "1", "--out", tmp_path / "grown"], "grow",
             f"{weights} is a truncated safetensors file")
    assert _files(tmp_path) == before


def test_a_model_safetensors_with_an_absurd_shape_in_a_model_folder_names_the_file(tmp_path, capsys, model_folder):
    header = json.dumps({"w": {"dtype": "F32", "shape": [10**12, 10**12], "data_offsets": [0, 4]}}).encode()
    weights = model_folder / "model.safetensors"
    weights.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    before = _files(tmp_path)
    _refused(capsys, ["grow", model_folder, "--insert", "1", "--out", tmp_path / "grown"], "grow",
             f"{weights} has a corrupt safetensors header")
    assert _files(tmp_path) == before


@pytest.mark.parametrize("flag", ["--jobs", "--threads"])
def test_an_absurd_number_of_jobs_or_threads_is_refused_before_anything_starts(tmp_path, capsys, flag):
    out = tmp_path / "study"  # --threads 100000 started the study, each run asking torch for 100000 threads
    _refused(capsys, ["study", "--preset", "demo", flag, "100000", "--out", out, "--dry-run"], "study",
             "at most 1024", "100000")
    assert not out.exists()


def test_a_drop_that_leaves_no_key_writes_nothing(tmp_path, capsys, model_folder):
    from safetensors.torch import load_file

    keys = load_file(str(model_folder / "model.safetensors"))
    drops = [arg for first in sorted({k[0] for k in keys}) for arg in ("--drop", first)]
    before = _files(tmp_path)  # a header-only safetensors file, holding no tensor, was written with exit status 0
    _refused(capsys, ["convert", model_folder / "model.safetensors", tmp_path / "out.safetensors", "--from",
                      "layerscale", *drops], "convert", "no key")
    assert _files(tmp_path) == before
