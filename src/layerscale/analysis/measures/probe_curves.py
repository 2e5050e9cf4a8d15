"""Probe curves over several splits with their bootstrap: accuracy per observation point and block, the embedding
baseline, and the control-task selectivity (:mod:`~layerscale.analysis.measures.probes`,
:mod:`~layerscale.analysis.measures.control_task`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...stats.bootstrap import bootstrap_means, bootstrap_weights
from .control_task import control_labels, kmeans_types
from ..intervals import IntervalTable
from .probes import probe_split, ridge_probe_correct

__all__ = ["ProbeResults", "probe_curves"]


@dataclass
class ProbeResults:
    """``accuracy[point]`` per block, ``embedding[pooling]``, ``selectivity[point]`` and the replicated curves
    ``replicated[point]`` ``(B, L)`` of the non-embedding points."""

    accuracy: dict[str, list[float]]
    embedding: dict[str, float]
    selectivity: dict[str, list[float]]
    replicated: dict[str, torch.Tensor]


def probe_curves(pooled: dict[str, torch.Tensor], labels: torch.Tensor, train_fraction: float, seed: int, splits: int,
            alpha: float, replicates: int, types_per_class: int, intervals: IntervalTable) -> ProbeResults:
    """Probe accuracy (mean over ``splits`` seeded splits) per point and block, at the embedding, and the
    control-task selectivity (:mod:`~layerscale.analysis.measures.control_task`) of the block outputs and the embedding;
    each point's replicated curve ``(B, L)`` — a replicate draws ``splits`` splits with replacement and resamples
    each one's test examples (the same draws for the task and its control: the selectivity is paired)."""
    n, num_classes = labels.shape[0], int(labels.max()) + 1
    names = sorted(pooled)
    # the types of the control task: clusters of the mean-pooled embedding (the class token's x^(0) is the same
    # for every input, so it has no types); one control task for every point and pooling
    types = kmeans_types(pooled["embedding/mean"][:, 0], types_per_class * num_classes, seed)
    control_task = control_labels(types, labels, seed)
    with_control = [name for name in names if name.split("/")[0] in ("block_out", "embedding")]
    correct: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    control: dict[str, list[torch.Tensor]] = {name: [] for name in with_control}
    weights = []
    for s in range(splits):
        train, test = probe_split(n, train_fraction, seed + s)
        weights.append(bootstrap_weights(len(test), replicates, seed=seed + 7919 * (s + 1)))
        for name in names:
            features = pooled[name].transpose(0, 1)
            correct[name].append(ridge_probe_correct(features, labels, train, test, num_classes, alpha).double())
            if name in control:
                control[name].append(ridge_probe_correct(features, control_task, train, test, num_classes,
                                                         alpha).double())
    picks = torch.randint(0, splits, (replicates, splits), generator=torch.Generator().manual_seed(seed + 104729))

    def replicate(chunks: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        per_split = torch.stack([bootstrap_means(c.T, w) for c, w in zip(chunks, weights)])  # (S, B, P)
        rows = per_split[picks, torch.arange(replicates)[:, None]]  # (B, S, P): the drawn splits
        return torch.stack([c.mean(dim=1) for c in chunks]).mean(dim=0), rows.mean(dim=1)

    out = ProbeResults({}, {}, {}, {})
    for name in names:
        estimate, boot = replicate(correct[name])
        point, pooling = name.split("/")
        selectivity = None
        if name in control:
            control_estimate, control_boot = replicate(control[name])
            selectivity, boot_selectivity = estimate - control_estimate, boot - control_boot
        if point == "embedding":
            out.embedding[pooling] = float(estimate[0])
            intervals.add(f"probe_embedding/{pooling}", boot[:, 0])
            if selectivity is not None:
                out.selectivity[name] = selectivity.tolist()
                intervals.add(f"probe_selectivity/{name}", boot_selectivity)
        else:
            out.accuracy[name] = estimate.tolist()
            out.replicated[name] = boot
            intervals.add(f"probe/{name}", boot)
            if selectivity is not None:
                out.selectivity[name] = selectivity.tolist()
                intervals.add(f"probe_selectivity/{name}", boot_selectivity)
    return out
