"""Fixtures the training tests share."""

import pytest
import torch
from train_helpers import tiny_config

from layerscale.train import run


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished two-step run of the tiny configuration (checkpoint ``step_00000002``), trained once per test
    module; a test that changes it works on a copy."""
    directory = tmp_path_factory.mktemp("finished") / "run"
    torch.set_num_threads(1)
    run(tiny_config(optim={"max_steps": 2}), out=directory)
    return directory
