"""Linear probes: how linearly decodable the labels are from a representation.

A closed-form ridge classifier (Alain & Bengio 2016, "Understanding intermediate layers using linear classifier
probes", arXiv 1610.01644, use linear probes this way; ridge regression onto one-hot targets is the closed-form
variant). On the training part of the examples, features are standardised (train mean and standard deviation), a
bias is absorbed by centring, and

    W = (XᵀX + λ I)⁻¹ Xᵀ (Y − Ȳ),  λ = alpha · n_train,

with ``Y`` the one-hot labels; a test example is assigned ``argmax(x W + Ȳ)``. The score is top-1 accuracy on the
held-out part. There is no randomness besides the split, which a seeded permutation fixes. Many probes (one per
layer and observation point) are solved in one batched call.
"""

from __future__ import annotations

import torch

__all__ = ["probe_split", "ridge_probe_accuracy", "ridge_probe_correct"]


def probe_split(num_examples: int, train_fraction: float = 0.5, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train_indices, test_indices)``: a seeded random permutation cut at ``train_fraction``."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"probe train_fraction must be in (0, 1), got {train_fraction!r}")
    n_train = int(round(num_examples * train_fraction))
    if n_train < 2 or num_examples - n_train < 1:
        raise ValueError(f"probes need at least 2 training and 1 test example; {num_examples} examples with "
                         f"train_fraction {train_fraction} give {n_train} and {num_examples - n_train}")
    order = torch.randperm(num_examples, generator=torch.Generator().manual_seed(seed))
    return order[:n_train], order[n_train:]


def ridge_probe_accuracy(features: torch.Tensor, labels: torch.Tensor, train: torch.Tensor, test: torch.Tensor,
                         num_classes: int, alpha: float = 1e-3) -> torch.Tensor:
    """Held-out accuracy of a ridge probe per representation.

    ``features`` is ``(P, N, D)``: ``P`` representations of the same ``N`` examples; ``labels`` ``(N,)``;
    ``train``/``test`` index the examples. Returns ``(P,)`` accuracies in ``[0, 1]`` (float64).
    """
    return ridge_probe_correct(features, labels, train, test, num_classes, alpha).double().mean(dim=1)


def ridge_probe_correct(features: torch.Tensor, labels: torch.Tensor, train: torch.Tensor, test: torch.Tensor,
                        num_classes: int, alpha: float = 1e-3) -> torch.Tensor:
    """``(P, len(test))`` booleans: whether each representation's probe classifies each held-out example right
    (arguments as for :func:`ridge_probe_accuracy`; the bootstrap resamples these per example)."""
    if features.dim() != 3 or features.shape[1] != labels.shape[0]:
        raise ValueError(f"probe features must be (probes, examples, width) with {labels.shape[0]} examples, got "
                         f"{tuple(features.shape)}")
    if alpha <= 0:
        raise ValueError(f"probe alpha must be > 0, got {alpha!r}")
    x = features.double()
    x_train, x_test = x[:, train], x[:, test]
    mean = x_train.mean(dim=1, keepdim=True)
    std = x_train.std(dim=1, keepdim=True).clamp_min(1e-8)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    one_hot = torch.nn.functional.one_hot(labels[train], num_classes).double()
    prior = one_hot.mean(dim=0)
    n_train, width = x_train.shape[1], x_train.shape[2]
    gram = x_train.transpose(1, 2) @ x_train + alpha * n_train * torch.eye(width, dtype=torch.float64)
    weights = torch.linalg.solve(gram, x_train.transpose(1, 2) @ (one_hot - prior))
    predicted = (x_test @ weights + prior).argmax(dim=-1)
    return predicted == labels[test]
