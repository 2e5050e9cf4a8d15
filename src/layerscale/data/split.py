"""Deterministic stratified split for datasets that ship without a train/test split."""

from __future__ import annotations

import torch


def stratified_split(labels: torch.Tensor, test_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split indices `0..len(labels)-1` into (train, test), both sorted ascending.

    Each class contributes `round(count * test_fraction)` of its samples to test, chosen by a
    permutation from `torch.Generator().manual_seed(seed)`; the same labels and seed always give the
    same split, on any machine (torch's CPU generator is platform independent).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    gen = torch.Generator().manual_seed(seed)
    train_parts, test_parts = [], []
    for cls in torch.unique(labels).tolist():  # sorted, so the generator is consumed in a fixed order
        idx = torch.nonzero(labels == cls).flatten()
        idx = idx[torch.randperm(len(idx), generator=gen)]
        n_test = int(round(len(idx) * test_fraction))
        test_parts.append(idx[:n_test])
        train_parts.append(idx[n_test:])
    train = torch.cat(train_parts).sort().values
    test = torch.cat(test_parts).sort().values
    return train, test
