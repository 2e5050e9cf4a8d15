"""`make_loader`: a DataLoader whose order is a function of a seed, for exactly reproducible training."""

from __future__ import annotations

import numbers

import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from ..generator_seed import check_generator_seed
from ..messages import shown_value


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {shown_value(value)}")


def make_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    shuffle: bool,
    seed: int = 0,
    num_workers: int = 0,
    drop_last: bool = False,
    distributed: bool = False,
    num_replicas: int | None = None,
    rank: int | None = None,
    pin_memory: bool = False,
) -> DataLoader:
    """A DataLoader whose shuffling and worker seeds derive from `seed` alone.

    Single process: the loader owns `torch.Generator().manual_seed(seed)`, which drives the shuffle
    and the per-epoch base seed of worker processes (each worker's global torch RNG, hence its
    augmentation, is seeded from it). Two loaders built with the same arguments yield the same batches,
    epoch after epoch. To resume mid-run exactly, save and restore `loader.generator.get_state()`
    (and, with `num_workers=0`, `torch.get_rng_state()`, which the augmentation draws from).

    `distributed=True`: a `DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last)`
    shards the data (replicas and rank default to the initialised process group). The trainer must
    call `loader.sampler.set_epoch(epoch)` before each epoch, or every epoch repeats the same order.
    Workers are not persistent, so each epoch reseeds them from the generator.
    """
    _check_int("batch_size", batch_size, 1)
    _check_int("num_workers", num_workers, 0)
    seed = check_generator_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    sampler = None
    if distributed:
        sampler = DistributedSampler(
            dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last
        )
        shuffle = False  # the sampler shuffles; DataLoader refuses both
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        sampler=sampler,
        num_workers=num_workers,
        drop_last=drop_last,
        generator=generator,
        pin_memory=pin_memory,
    )
