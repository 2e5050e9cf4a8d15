"""Diagnostics tests share two short real training runs (digits), made once per session (one thread: see
tests/conftest.py)."""

import pytest
import torch
from diagnostics_helpers import train_tiny


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory):
    """Two finished runs, ``layerscale`` and ``prenorm`` (ViT depth 3 on digits, 6 steps, diagnostics every 2)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("runs")
    return {residual: train_tiny(root / residual, residual=residual).run_dir for residual in ("layerscale", "prenorm")}
