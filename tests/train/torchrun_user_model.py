"""A user's model and dataset for the DDP test of ``run(model=..., train_data=...)``; run as a script under
torchrun it trains them in every process (each rank builds the same model: same seed)."""

import sys

import torch
from torch import nn
from torch.utils.data import TensorDataset

CONFIG = {"data": {"batch_size": 16}, "optim": {"epochs": 2, "lr": 1e-2, "warmup_steps": 2},
          "run": {"progress": "none", "eval_every_steps": 3, "checkpoint_every_steps": 6, "log_every_steps": 3,
                  "device": "cpu"}}  # two ranks on the CPU (gloo): one GPU would refuse a second rank


def build() -> tuple[nn.Module, TensorDataset, TensorDataset]:
    """The model (seeded), 96 training and 37 evaluation samples (an odd count: padding must not count twice)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    x = torch.randn(133, 6, generator=torch.Generator().manual_seed(0))
    y = x[:, :3].argmax(1)
    return model, TensorDataset(x[:96], y[:96]), TensorDataset(x[96:], y[96:])


if __name__ == "__main__":
    from layerscale.train import run

    model, train, evaluation = build()
    run(model=model, train_data=train, eval_data=evaluation, config=CONFIG, out=sys.argv[1])
