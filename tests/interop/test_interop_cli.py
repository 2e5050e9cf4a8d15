"""``layerscale convert``: format detection, the mapping summary, atomic output and one-line errors (exit 2)."""

import os

import pytest
import torch

from interop_peers import SMALL, images, timm_model
from layerscale import create_model
from layerscale.checkpoint_io import load_state_dict_file, read_state_dict_file
from layerscale.cli import main
from layerscale.interop import load_pretrained_into

pytest.importorskip("safetensors")
pytest.importorskip("timm")


@pytest.fixture(scope="module")
def peer():
    return timm_model("cait_xxs24_224")


@pytest.fixture
def official_cait(tmp_path, peer):
    path = tmp_path / "XXS24_224.pth"
    torch.save({"model": {"module." + k: v for k, v in peer.state_dict().items()}, "epoch": 3}, path)
    return path


def test_convert_official_cait_file(tmp_path, official_cait, peer, capsys):
    dst = tmp_path / "cait.safetensors"
    assert main(["convert", str(official_cait), str(dst)]) == 0
    out = capsys.readouterr().out
    assert "(pytorch, weights under 'model')" in out
    assert "format timm_cait -> layerscale" in out and "prefix 'module.' stripped" in out
    assert "blocks.{i}.gamma_1 -> blocks.{i}.ls1.gamma" in out and "unchanged names" in out
    loaded = read_state_dict_file(dst)
    assert loaded.metadata["layerscale_key_format"] == "layerscale"
    assert loaded.metadata["converted_from"] == "timm_cait"
    ours = create_model("cait_xxs24_224", **SMALL).eval()
    ours.load_state_dict(loaded.tensors)
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), peer(x), atol=1e-5, rtol=0)


def test_convert_back_to_timm_is_exact(tmp_path, official_cait, peer):
    ours_path, timm_path = tmp_path / "ours.safetensors", tmp_path / "timm.safetensors"
    assert main(["convert", str(official_cait), str(ours_path)]) == 0
    assert main(["convert", str(ours_path), str(timm_path), "--to", "timm_cait"]) == 0
    back = load_state_dict_file(timm_path)
    assert back.keys() == peer.state_dict().keys()
    assert all(torch.equal(back[k], v) for k, v in peer.state_dict().items())
    load_pretrained_into(timm_model("cait_xxs24_224"), timm_path)  # and timm's model takes it


def test_existing_destination_needs_force_and_survives_errors(tmp_path, official_cait, capsys):
    dst = tmp_path / "out.safetensors"
    dst.write_bytes(b"precious")
    assert main(["convert", str(official_cait), str(dst)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert main(["convert", str(official_cait), str(dst), "--force", "--from", "hf_dinov2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "have no counterpart" in err and "blocks.0.attn.proj_l.weight" in err
    assert dst.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == sorted([official_cait.name, dst.name])


@pytest.mark.parametrize("args, message", [
    (["--to", "keras"], "unknown checkpoint format 'keras'"),
    (["--drop", "nothing."], "drop prefix 'nothing.' matches no key"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, official_cait, capsys, args, message):
    dst = tmp_path / "out.safetensors"
    assert main(["convert", str(official_cait), str(dst), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not dst.exists()


def test_unreadable_sources(tmp_path, capsys):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("hello, these are not weights")
    assert main(["convert", str(foreign), str(tmp_path / "o.safetensors")]) == 2
    assert "is not a safetensors or PyTorch weights file" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "absent.pth"), str(tmp_path / "o.safetensors")]) == 2
    assert "no such weights file" in capsys.readouterr().err


def test_model_check_passes_for_a_fitting_file(tmp_path, capsys):
    src, dst = tmp_path / "gpt.pt", tmp_path / "gpt.safetensors"
    torch.save({"model": create_model("gpt_nano").state_dict()}, src)
    assert main(["convert", str(src), str(dst), "--model", "gpt_nano"]) == 0
    assert "checked: every key and shape fits model 'gpt_nano'" in capsys.readouterr().out


def test_model_check_lists_what_does_not_fit(tmp_path, official_cait, capsys):
    dst = tmp_path / "out.safetensors"
    assert main(["convert", str(official_cait), str(dst), "--model", "cait_xxs24_224"]) == 2
    err = capsys.readouterr().err
    assert "the weights do not fit model 'cait_xxs24_224'" in err and "missing key(s) [blocks.10." in err
    assert "blocks.0.ls1.gamma: checkpoint (32,) vs model (192,)" in err
    assert not dst.exists()


def test_a_checkpoint_with_a_nan_weight_is_refused_and_nothing_written(tmp_path, peer, capsys):
    """As ``fold`` refuses it: a converted copy would pass the NaN on to whoever loads it."""
    state = {k: v.clone() for k, v in peer.state_dict().items()}
    state["blocks.0.attn.proj.weight"][0, 0] = float("nan")
    src, dst = tmp_path / "nan.pth", tmp_path / "out.safetensors"
    torch.save(state, src)
    assert main(["convert", str(src), str(dst)]) == 2
    err = capsys.readouterr().err
    assert "'blocks.0.attn.proj.weight' holds 1 NaN or infinite value(s)" in err and err.count("\n") == 1
    assert not dst.exists()
