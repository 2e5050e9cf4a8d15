"""A run's checkpoint read with another training config (config=, --config): the model its training state records
must compute the same function with these weights as the one the config builds. A config with another head count
loaded the weights silently (keys and shapes are the same); now it is one line naming the setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from layerscale.models.registry import create_model
from layerscale.sources.run_model import load_run_model
from layerscale.train.config.schema import TrainConfig
from layerscale.train.setup.data_setup import load_train_data
from layerscale.train.state.checkpoint import save_checkpoint

CONFIG = {"model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "mlp_ratio": 1.0, "depth": 2},
          "data": {"name": "digits", "batch_size": 64, "augment": False}, "optim": {"epochs": 1, "max_steps": 8}}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A run's checkpoint at step 1 written by hand (no training), its model arguments recorded as the trainer does."""
    run = tmp_path_factory.mktemp("run")
    (run / "config.yaml").write_text(json.dumps(CONFIG))
    cfg = TrainConfig.from_dict(CONFIG)
    args = {**load_train_data(cfg).model_args, **cfg.model.options}
    torch.manual_seed(0)
    model = create_model(cfg.model.name, **args)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = {"step": 1, "epoch": 0, "batch_in_epoch": 1, "optimizer": optimizer.state_dict(),
             "scheduler": {"last_epoch": 0}, "rng": [{"cpu": torch.get_rng_state(), "cuda": None}], "model": "vit",
             "model_args": args}
    return save_checkpoint(run, 1, model.state_dict(), state, keep=1)


def _config(tmp_path, **model):
    path = tmp_path / "other.yaml"
    path.write_text(json.dumps({**CONFIG, "model": {**CONFIG["model"], **model}}))
    return path


def test_another_head_count_is_refused(tmp_path, checkpoint):
    with pytest.raises(ValueError, match=r"num_heads \(the trained model 2, configured model 4\)") as info:
        load_run_model(checkpoint, config=_config(tmp_path, num_heads=4))
    assert str(checkpoint) in str(info.value) and "\n" not in str(info.value)


def test_another_norm_epsilon_is_refused(tmp_path, checkpoint):
    with pytest.raises(ValueError, match=r"norm_eps \(the trained model 1e-06, configured model 1e-05\)"):
        load_run_model(checkpoint, config=_config(tmp_path, norm_eps=1e-5))


def test_a_training_only_difference_still_loads(tmp_path, checkpoint):
    loaded = load_run_model(checkpoint, config=_config(tmp_path, drop_path_rate=0.1))
    assert loaded.model.blocks[0].attn.num_heads == 2
