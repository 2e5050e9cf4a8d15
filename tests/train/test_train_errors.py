"""Every bad input is one clear error, raised before anything is written: the run directory stays as it was."""

import json
import os
import shutil

import pytest
import torch
from train_helpers import snapshot, tiny_config

from layerscale.checkpoint_io import save_safetensors_atomic
from layerscale.cli import main
from layerscale.models import create_model
from layerscale.train import run
from layerscale.train.state.checkpoint import STATE_FORMAT


def _replace_model(config, **model):
    config["model"] = model
    return config


NEW_RUN_ERRORS = [
    ("missing data folder", lambda tmp: tiny_config(data={"name": "mnist", "path": str(tmp / "no-such-dir")}),
     FileNotFoundError, r"no-such-dir: data directory for mnist not found"),
    ("unknown dataset", lambda tmp: tiny_config(data={"name": "imagenet"}),
     ValueError, r"config key data\.name: 'imagenet' is not allowed \(did you mean imagefolder\?\); allowed: digits, mnist"),
    ("unknown model", lambda tmp: _replace_model(tiny_config(), name="vit_gigantic"),
     ValueError, r"config key model\.name: unknown model 'vit_gigantic'; allowed: .*vit"),
    ("image size the model cannot take", lambda tmp: tiny_config(model={"patch_size": 3}),
     ValueError, (r"model 'vit' with patch_size 3 cannot take the 8x8 images of dataset 'digits'.*"
                  r"multiple of 3 \(e\.g\. 9\).*one of \[1, 2, 4, 8\]")),
    ("channels the data does not have", lambda tmp: tiny_config(model={"in_chans": 3}),
     ValueError, r"model\.in_chans 3 does not match dataset 'digits', which has 1 channels"),
    ("unknown config key", lambda tmp: tiny_config(optim={"learning_rate": 0.1}),
     ValueError, r"unknown config key optim\.learning_rate; allowed in optim: "),
    ("wrong type", lambda tmp: tiny_config(optim={"epochs": "ten"}),
     ValueError, r"config key optim\.epochs: expected int, got 'ten' \(str\)"),
    ("batch larger than the data", lambda tmp: tiny_config(data={"batch_size": 5000}),
     ValueError, r"data\.batch_size: 5000 is larger than the training split \(1438 samples\)"),
    ("text window longer than the model's", lambda tmp: {
        "model": {"name": "gpt", "embed_dim": 32, "depth": 1, "num_heads": 2, "block_size": 8},
        "data": {"name": "text", "path": str(tmp), "block_size": 16}},
     ValueError, r"data\.block_size 16 exceeds model\.block_size 8 of model 'gpt'"),
]


@pytest.mark.parametrize("case", NEW_RUN_ERRORS, ids=[c[0] for c in NEW_RUN_ERRORS])
def test_bad_new_run_is_refused_before_the_run_directory_exists(tmp_path, case):
    _, make_config, error, message = case
    with pytest.raises(error, match=message) as info:
        run(make_config(tmp_path), out=tmp_path / "run")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "run").exists()


def test_existing_run_directory_is_not_reused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path / "run")
    with pytest.raises(FileExistsError, match=r"run directory already exists and is not empty; continue it with "
                                              r"--resume"):
        run(tiny_config(), out=tmp_path / "run")
    assert snapshot(tmp_path / "run") == before


class NotATensor:
    """Anything a ``weights_only`` load must refuse."""


def _checkpoint(run_dir):
    return run_dir / "checkpoints" / "step_00000002"


def _truncate_weights(run_dir):
    path = _checkpoint(run_dir) / "model.safetensors"
    path.write_bytes(path.read_bytes()[:300])


def _pickled_object_state(run_dir):
    torch.save({"format": STATE_FORMAT, "version": 1, "payload": NotATensor()}, _checkpoint(run_dir) / "train_state.pt")


def _garbage_state(run_dir):
    (_checkpoint(run_dir) / "train_state.pt").write_bytes(b"\x00garbage" * 50)


def _truncate_state(run_dir):
    path = _checkpoint(run_dir) / "train_state.pt"
    path.write_bytes(path.read_bytes()[:-200])


def _foreign_state(run_dir):
    torch.save({"epoch": 3, "model": {"w": torch.zeros(2)}}, _checkpoint(run_dir) / "train_state.pt")


def _weights_of_another_architecture(run_dir):
    other = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=32, depth=3,
                         num_heads=2)
    save_safetensors_atomic(other.state_dict(), _checkpoint(run_dir) / "model.safetensors")


def _float8_weight(run_dir):
    from safetensors.torch import load_file, save_file

    path = _checkpoint(run_dir) / "model.safetensors"
    weights = load_file(str(path))
    weights["head.weight"] = weights["head.weight"].to(torch.float8_e4m3fn)
    save_file(weights, str(path))


def _torch_pickle_as_weights(run_dir):
    torch.save({"w": torch.zeros(2)}, _checkpoint(run_dir) / "model.safetensors")


def _depth_x(run_dir):
    path = run_dir / "config.yaml"
    text = path.read_text()
    assert "depth: 2\n" in text
    path.write_text(text.replace("depth: 2\n", "depth: x\n", 1))


RESUME_ERRORS = [
    ("truncated weights", _truncate_weights, [], ValueError, r"model\.safetensors is a truncated safetensors file"),
    ("state holding a python object", _pickled_object_state, [], ValueError,
     r"train_state\.pt: holds objects other than tensors and plain containers; refusing to unpickle it"),
    ("garbage state", _garbage_state, [], ValueError,
     r"train_state\.pt: not a training state written by layerscale train \(not a PyTorch zip archive\)"),
    ("truncated state", _truncate_state, [], ValueError, r"train_state\.pt: truncated or corrupt training state"),
    ("foreign state", _foreign_state, [], ValueError,
     r"train_state\.pt: not a training state written by layerscale train"),
    ("weights of another architecture", _weights_of_another_architecture, [], ValueError,
     r"checkpoint of another architecture than the configured model: unexpected \[blocks\.2\."),
    ("float8 weight", _float8_weight, [], ValueError,
     r"checkpoint of another architecture than the configured model: dtype \(checkpoint vs model\) "
     r"\[head\.weight torch\.float8_e4m3fn vs torch\.float32\]"),
    ("pytorch file named safetensors", _torch_pickle_as_weights, [], ValueError,
     r"model\.safetensors: expected a safetensors file, found a pytorch file"),
    ("config changed to another architecture", lambda run_dir: None, ["model.depth=4"], ValueError,
     r"checkpoint of another architecture than the configured model: missing \[blocks\.2\."),
    ("unknown key on resume", lambda run_dir: None, ["run.sed=3"], ValueError,
     r"^unknown config key run\.sed \(did you mean seed\?\)"),  # the override's key, not the file, is named
    ("config value of the wrong type", _depth_x, [], ValueError,
     r"run/config\.yaml: config key model\.depth: expected int, got 'x' \(str\)$"),
]


def test_resume_names_a_fifo_config_without_opening_it(tmp_path, finished_run):
    from disk_state import snapshot as kinds

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "config.yaml").unlink()
    os.mkfifo(run_dir / "config.yaml")
    before = kinds(tmp_path)
    with pytest.raises(ValueError, match=r"run/config\.yaml: is a FIFO \(named pipe\); expected the config\.yaml "):
        run(resume=run_dir)
    assert kinds(tmp_path) == before


@pytest.mark.parametrize("case", RESUME_ERRORS, ids=[c[0] for c in RESUME_ERRORS])
def test_bad_resume_is_refused_and_leaves_the_run_directory_as_it_was(tmp_path, finished_run, case):
    _, corrupt, overrides, error, message = case
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    corrupt(run_dir)
    before = snapshot(run_dir)
    with pytest.raises(error, match=message) as info:
        run(resume=run_dir, overrides=overrides)
    assert "\n" not in str(info.value)
    assert snapshot(run_dir) == before


def test_command_line_errors_are_one_line_with_status_2(tmp_path, capsys):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps(tiny_config(run={"progress": "fast"})))
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"layerscale train: error: {config}: config key run.progress: 'fast' is not allowed; allowed: "
                   "auto, bar, log, none")
    assert main(["train", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "run directory to resume not found" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
