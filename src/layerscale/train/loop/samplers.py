"""Index samplers that make the data order a pure function of (seed, epoch, rank, world size, position).

:class:`EpochShardSampler` is the order of ``torch.utils.data.DistributedSampler`` (permutation seeded with
``seed + epoch``, rank ``r`` takes every ``world``-th index starting at ``r``) plus a start position, so a run
resumed in the middle of an epoch continues with exactly the batches it would have seen. Because rank ``r`` of
``W`` holds ``perm[r::W]``, the ``i``-th batches of all ranks together are ``perm[i·B : (i+1)·B]`` for a global
batch ``B``: the same samples a single process sees at batch size ``B``.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

__all__ = ["EpochShardSampler", "EvalShardSampler"]


class EpochShardSampler(Sampler[int]):
    """Training indices for one rank. Call :meth:`set_epoch` before iterating each epoch.

    Epoch ``e``: ``perm = randperm(n, generator seeded seed + e)`` (``arange(n)`` without shuffling), truncated to a
    multiple of ``world_size`` so every rank gets the same count, then ``perm[rank::world_size][start:]``.
    """

    def __init__(self, num_samples: int, *, seed: int, rank: int = 0, world_size: int = 1, shuffle: bool = True):
        if num_samples < world_size:
            raise ValueError(f"{num_samples} training samples cannot be shared by {world_size} processes")
        self.num_samples, self.seed, self.rank, self.world_size, self.shuffle = (
            num_samples, seed, rank, world_size, shuffle)
        self.epoch, self.start = 0, 0

    @property
    def per_rank(self) -> int:
        return self.num_samples // self.world_size

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """Iterate epoch ``epoch`` from this rank's ``start``-th index on (0: the whole epoch)."""
        self.epoch, self.start = epoch, start

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            order = torch.randperm(self.num_samples, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        else:
            order = torch.arange(self.num_samples)
        mine = order[: self.per_rank * self.world_size][self.rank :: self.world_size]
        return iter(mine[self.start :].tolist())

    def __len__(self) -> int:
        return max(0, self.per_rank - self.start)


class EvalShardSampler(Sampler[int]):
    """Evaluation indices for one rank: ``rank, rank + W, rank + 2W, ...`` — every sample exactly once over all
    ranks — padded (with this rank's first index) to ``ceil(n / W)`` so that every rank runs the same number of
    batches, which sharded (FSDP) forwards require. The first :attr:`num_valid` indices count; the rest are
    padding the evaluator must mask out."""

    def __init__(self, num_samples: int, rank: int = 0, world_size: int = 1):
        self.indices = list(range(rank, num_samples, world_size))
        self.num_valid = len(self.indices)
        padded = -(-num_samples // world_size)
        self.indices += [self.indices[0] if self.indices else 0] * (padded - self.num_valid)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)
