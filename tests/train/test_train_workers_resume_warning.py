"""``train.run`` with DataLoader workers warns that a mid-epoch resume is not exact for a dataset drawing random
augmentation, naming the condition and the remedy; without workers it does not (item 2 of issue 28)."""

import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from layerscale.train import run


class NoisyDataset(Dataset):
    """Random augmentation in ``__getitem__``: Gaussian noise drawn from the process's global generator."""

    def __init__(self, n: int = 32):
        gen = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 8, generator=gen), torch.randint(0, 2, (n,), generator=gen)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] + 0.1 * torch.randn(8), self.y[i]


CONFIG = {"optim": {"epochs": 1, "warmup_steps": 1}, "run": {"progress": "none"}, "diagnostics": {"enabled": False}}


@pytest.mark.parametrize("workers", [0, 1])
def test_workers_warn_that_resume_is_exact_only_without_random_augmentation(tmp_path, workers):
    loader = DataLoader(NoisyDataset(), batch_size=8, num_workers=workers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(model=nn.Linear(8, 2), train_data=loader, config=CONFIG, out=tmp_path / "run")
    messages = [str(w.message) for w in caught if "num_workers" in str(w.message)]
    if workers == 0:
        assert messages == []
    else:
        assert len(messages) == 1
        assert messages[0].startswith("data.num_workers=1: resuming this run from a checkpoint taken inside an "
                                      "epoch is not exact if the dataset draws random numbers")
        assert "set data.num_workers: 0 for an exact resume" in messages[0]
