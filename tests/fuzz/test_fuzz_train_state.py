"""Fuzzing the fields of a checkpoint's ``train_state.pt`` (issue 30): any field replaced by any value
``torch.load(weights_only=True)`` can return is either refused by the checks a resume makes before touching a file
(one printable, bounded line) or restored by the trainer without an exception into a state the loop can run:
integer step, epoch and a position inside the epoch."""

import copy
import dataclasses

import pytest
import torch
from fuzz_helpers import TRAIN_STATE_FIELDS, assert_safe_message, field_values
from hypothesis import example, given
from hypothesis import strategies as st

from layerscale.train.state.checkpoint import load_checkpoint
from layerscale.train.config.schema import TrainConfig
from layerscale.train.setup.data_setup import load_train_data
from layerscale.train.distributed import setup_distributed, teardown_distributed, wrap_model
from layerscale.train.setup.model_build import build_model
from layerscale.train.runner import run
from layerscale.train.state.train_state import check_position, check_train_state
from layerscale.train.loop.trainer import Trainer

CONFIG = {"model": {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, "patch_size": 4},
          "data": {"name": "digits", "batch_size": 32}, "optim": {"max_steps": 2}, "run": {"progress": "none"},
          "diagnostics": {"enabled": False}}


@pytest.fixture(scope="module")
def resumable(tmp_path_factory):
    """A real checkpoint's train state and a trainer built for its config (restored into, example after example)."""
    directory = tmp_path_factory.mktemp("fuzz-state") / "run"
    torch.set_num_threads(1)
    run(CONFIG, out=directory)
    _, state = load_checkpoint(next(directory.glob("checkpoints/step_*")))
    cfg = TrainConfig.from_dict(CONFIG)
    ctx = setup_distributed("cpu")
    data = load_train_data(cfg)
    model = build_model(cfg.model.name, {**data.model_args, **cfg.model.options})
    trainer = Trainer(cfg, wrap_model(model, ctx, "ddp"), data, ctx, directory)
    yield state, trainer
    teardown_distributed(ctx)


def _replace(state, dotted, value):
    state = copy.deepcopy(state)
    node, parts = state, dotted.split(".")
    for part in parts[:-1]:
        key = int(part) if isinstance(node, list) else part
        if isinstance(node, list) and key >= len(node) or isinstance(node, dict) and key not in node:
            return None  # the path does not exist in this state (e.g. rng.0 on an empty list)
        node = node[key]
    node[int(parts[-1]) if isinstance(node, list) else parts[-1]] = value
    return state


@given(field=st.sampled_from(TRAIN_STATE_FIELDS), value=field_values)
@example(field="batch_in_epoch", value=10**6)
@example(field="step", value=-1000)
@example(field="step", value=float("inf"))
@example(field="early_stopping", value="x")
def test_a_crafted_field_is_refused_or_restores_cleanly(resumable, field, value):
    state, trainer = resumable
    crafted = _replace(state, field, value)
    if crafted is None:
        return
    try:
        check_train_state("train_state.pt", crafted)
        check_position("train_state.pt", crafted, trainer.steps_per_epoch)
    except ValueError as exc:
        assert_safe_message(exc)
        return
    with torch.random.fork_rng():
        try:
            trainer.restore(trainer.model.state_dict(), crafted)
        except (RuntimeError, KeyError, TypeError) as exc:  # the runner turns these into one line (another setup)
            assert str(exc)
            return
    position = dataclasses.asdict(trainer.state)
    assert all(isinstance(position[k], int) and position[k] >= 0 for k in ("step", "epoch", "batch_in_epoch"))
    assert position["batch_in_epoch"] < trainer.steps_per_epoch
