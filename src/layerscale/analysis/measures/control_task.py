"""A control task for linear probes (Hewitt & Liang 2019, "Designing and Interpreting Probes with Control Tasks",
arXiv 1909.03368, §2–3), adapted to inputs without word types.

Hewitt & Liang give every word *type* a random label (drawn from the task's label distribution) and ask how well
the probe predicts that: a probe can only succeed by memorising types, so its control accuracy measures the
probe's own capacity, and **selectivity** = task accuracy − control accuracy measures what the representation
makes linearly available beyond that. Images have no types, and held-out examples never repeat, so here the types
are clusters of the *input*: ``k``-means (Lloyd 1982; ``iterations`` rounds from seeded k-means++ centres, Arthur &
Vassilvitskii 2007) on the
mean-pooled embedding ``x^(0)`` (a class token's ``x^(0)`` is the same for every input), ``k = types_per_class ·
classes`` clusters, each given a
label drawn uniformly from the task's labels of the examples (so the label distribution is kept). Types then recur
between the probe's training and held-out halves, as words do, and a representation that keeps the input's
cluster structure lets the probe score above chance on the control task.
"""

from __future__ import annotations

import torch

__all__ = ["control_labels", "kmeans_types"]


def kmeans_types(features: torch.Tensor, k: int, seed: int = 0, iterations: int = 20) -> torch.Tensor:
    """``(N,)`` cluster index of each row of ``features`` ``(N, D)`` after Lloyd's ``k``-means (float64; k-means++
    initial centres drawn with the seed: each next centre with probability proportional to its squared distance
    from the nearest centre so far; an emptied cluster keeps its centre)."""
    if features.dim() != 2 or features.shape[0] < 1:
        raise ValueError(f"kmeans_types needs features (examples, width), got {tuple(features.shape)}")
    x = features.double()
    k = max(1, min(int(k), x.shape[0]))
    g = torch.Generator().manual_seed(seed)
    chosen = [int(torch.randint(0, x.shape[0], (1,), generator=g))]
    nearest = (x - x[chosen[0]]).pow(2).sum(dim=1)
    for _ in range(1, k):
        if float(nearest.sum()) <= 0:  # fewer distinct points than k: repeat one
            chosen.append(chosen[-1])
            continue
        chosen.append(int(torch.multinomial(nearest, 1, generator=g)))
        nearest = torch.minimum(nearest, (x - x[chosen[-1]]).pow(2).sum(dim=1))
    centres = x[chosen].clone()
    assign = torch.zeros(x.shape[0], dtype=torch.long)
    for _ in range(iterations):
        assign = torch.cdist(x, centres).argmin(dim=1)
        counts = torch.bincount(assign, minlength=k).double()
        sums = torch.zeros_like(centres).index_add_(0, assign, x)
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]
    return assign


def control_labels(types: torch.Tensor, labels: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """``(N,)`` control labels: each type gets the label of an example drawn uniformly at random (seeded), so the
    control task keeps the task's label distribution and every example of a type shares its label."""
    if types.shape != labels.shape:
        raise ValueError(f"types {tuple(types.shape)} and labels {tuple(labels.shape)} must match")
    g = torch.Generator().manual_seed(seed)
    count = int(types.max()) + 1
    per_type = labels[torch.randint(0, labels.shape[0], (count,), generator=g)]
    return per_type[types]
