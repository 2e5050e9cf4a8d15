"""A training run read as a source (``analyze`` / ``prune`` / ``grow`` RUN) is a folder someone else made: a link
for its ``config.yaml``, its ``checkpoints/`` folder, a checkpoint directory or a file in one would load a config or
weights from anywhere on the disk under the run's name; each is refused in one line (exit status 2 on the CLI)
before anything is read, and the same run without links still loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from layerscale.cli import main
from layerscale.models.registry import create_model
from layerscale.sources import read_source
from layerscale.train.config.schema import TrainConfig
from layerscale.train.setup.data_setup import load_train_data
from layerscale.train.state.checkpoint import MODEL_FILE, STATE_FILE, save_checkpoint

CONFIG = {"model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "mlp_ratio": 1.0, "depth": 2},
          "data": {"name": "digits", "batch_size": 64, "augment": False}, "optim": {"epochs": 1, "max_steps": 8}}
STEP = "step_00000001"


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> Path:
    """A complete run written by hand (checkpoint at step 1, no training), standing for a run elsewhere on disk."""
    run = tmp_path_factory.mktemp("elsewhere") / "run"
    run.mkdir()
    (run / "config.yaml").write_text(json.dumps(CONFIG))
    cfg = TrainConfig.from_dict(CONFIG)
    torch.manual_seed(0)
    model = create_model(cfg.model.name, **{**load_train_data(cfg).model_args, **cfg.model.options})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = {"step": 1, "epoch": 0, "batch_in_epoch": 1, "optimizer": optimizer.state_dict(),
             "scheduler": {"last_epoch": 0}, "rng": [{"cpu": torch.get_rng_state(), "cuda": None}], "model": "vit"}
    save_checkpoint(run, 1, model.state_dict(), state, keep=1)
    return run


def _hostile(kind: str, elsewhere: Path, root: Path) -> Path:
    run = root / kind
    shutil.copytree(elsewhere, run)
    checkpoint = run / "checkpoints" / STEP
    if kind == "config":
        (run / "config.yaml").unlink()
        (run / "config.yaml").symlink_to(elsewhere / "config.yaml")
    elif kind == "checkpoints-folder":
        shutil.rmtree(run / "checkpoints")
        (run / "checkpoints").symlink_to(elsewhere / "checkpoints")
    elif kind == "checkpoint-directory":
        (run / "checkpoints" / "step_00000009").symlink_to(elsewhere / "checkpoints" / STEP)
    else:
        name = {"weights": MODEL_FILE, "train-state": STATE_FILE}[kind]
        (checkpoint / name).unlink()
        (checkpoint / name).symlink_to(elsewhere / "checkpoints" / STEP / name)
    return run


KINDS = ("config", "checkpoints-folder", "checkpoint-directory", "weights", "train-state")


@pytest.mark.parametrize("kind", KINDS)
def test_a_link_in_a_run_directory_is_refused_before_it_is_read(elsewhere, tmp_path, kind):
    run = _hostile(kind, elsewhere, tmp_path)
    with pytest.raises(ValueError, match=r"refused \(a symbolic link inside the (run directory|run's checkpoints "
                                         r"folder|checkpoint directory)\); links are not followed"):
        read_source(run)


@pytest.mark.parametrize("kind", ("config", "weights", "train-state"))
def test_a_link_in_a_checkpoint_directory_given_directly_is_refused(elsewhere, tmp_path, kind):
    checkpoint = _hostile(kind, elsewhere, tmp_path) / "checkpoints" / STEP
    with pytest.raises(ValueError, match="symbolic link inside the"):
        read_source(checkpoint)


def test_the_cli_refuses_in_one_line_with_status_2(elsewhere, tmp_path, capsys):
    run = _hostile("checkpoint-directory", elsewhere, tmp_path)
    assert main(["analyze", str(run), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "step_00000009: refused (a symbolic link" in error
    assert not (tmp_path / "out").exists()


def test_the_same_run_without_links_loads(elsewhere):
    found = read_source(elsewhere)
    assert found.run.checkpoint == elsewhere / "checkpoints" / STEP
    assert read_source(elsewhere / "checkpoints" / STEP).run is not None


@pytest.mark.parametrize("kind", ("checkpoints-folder", "checkpoint-directory", "weights"))
def test_fold_refuses_a_link_in_the_run_it_reads(elsewhere, tmp_path, capsys, kind):
    """``layerscale fold RUN`` (and ``run.init_from``) find the weights through ``run_paths.weights_file``."""
    run = _hostile(kind, elsewhere, tmp_path)
    if kind == "checkpoint-directory":  # the link is the latest checkpoint
        shutil.rmtree(run / "checkpoints" / STEP)
    assert main(["fold", str(run), str(tmp_path / "folded.safetensors")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "refused (a symbolic link inside the" in error, error
    assert not (tmp_path / "folded.safetensors").exists()
