"""Every test runs on one intra-op thread: the models in the tests are tiny (fastest that way), and the suite may
run as several pytest workers on a machine with few cores. Also: :func:`train_with_cli`, for tests of the commands
that read a run directory."""

import json
import sys
from pathlib import Path

import pytest
import torch

# this repository's own evidence pipelines (evidence/) live beside src/, outside the installed package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def train_with_cli(tmp_path_factory):
    """``train_with_cli(config, name)``: the run directory that ``layerscale train --config CONFIG --out RUN`` writes
    for the configuration dict ``config``, in a new temporary folder named after ``name``; the command must succeed."""
    from layerscale.cli import main

    def train(config: dict, name: str):
        torch.set_num_threads(1)
        root = tmp_path_factory.mktemp(name)
        config_file = root / "config.json"
        config_file.write_text(json.dumps(config))
        assert main(["train", "--config", str(config_file), "--out", str(root / "run")]) == 0
        return root / "run"

    return train
