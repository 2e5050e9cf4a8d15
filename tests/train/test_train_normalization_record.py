"""An image run's ``summary.json`` records the normalisation its images were fed with (``normalization``: mean and
std per channel, pixels in [0, 1]), the statistics of the whole training split as ``load_dataset`` documents them,
recomputed here from scikit-learn's raw images."""

from __future__ import annotations

import json

import pytest
import torch

from layerscale.train import run

pytest.importorskip("sklearn")

CONFIG = {
    "model": {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, "patch_size": 4},
    "data": {"name": "digits", "batch_size": 32, "validation_fraction": 0.2},
    "optim": {"epochs": 1, "max_steps": 2, "warmup_steps": 0},
    "run": {"progress": "none", "log_every_steps": 1, "checkpoint_every_steps": 0},
}


def test_an_image_run_records_the_whole_training_splits_statistics(tmp_path):
    from sklearn.datasets import load_digits

    from layerscale.data.registry import load_dataset

    run(CONFIG, out=tmp_path / "r")
    recorded = json.loads((tmp_path / "r" / "summary.json").read_text())["normalization"]
    bundle = load_dataset("digits", test_fraction=0.2, seed=0)  # the split the run used (split_seed 0)
    digits = load_digits()
    test_rows = {tuple(row) for row in (bundle.test.images.flatten(1) * 1.0).tolist()}
    pixels = torch.tensor(digits.images, dtype=torch.float64) / 16.0
    train = [img for img in pixels if tuple((img * 16.0).flatten().tolist()) not in test_rows]
    assert len(train) == len(bundle.train)  # validation included: 0.2 of these were carved off, not removed
    stacked = torch.stack(train)
    assert recorded["mean"] == pytest.approx([float(stacked.mean())], rel=1e-6)
    assert recorded["std"] == pytest.approx([float(stacked.std(unbiased=False))], rel=1e-5)
