"""``TensorImageDataset.__getitems__`` (one pass per batch) returns exactly what ``__getitem__`` returns per sample."""

import torch
from torch.utils.data import DataLoader

from layerscale.data.tensor_dataset import TensorImageDataset


def _dataset(transform=None) -> TensorImageDataset:
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (40, 3, 6, 6), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 5, (40,), generator=generator)
    return TensorImageDataset(images, labels, mean=(0.3, 0.5, 0.7), std=(0.2, 0.25, 0.3), transform=transform)


def test_batched_fetch_is_bitwise_the_per_sample_fetch():
    dataset = _dataset()
    indices = [7, 3, 3, 39, 0, 21]
    batched = dataset.__getitems__(indices)
    assert len(batched) == len(indices)
    for (x, y), i in zip(batched, indices):
        ref_x, ref_y = dataset[i]
        assert torch.equal(x, ref_x) and torch.equal(y, ref_y)
        assert x.dtype == torch.float32 and y.dtype == torch.int64


def test_random_transform_draws_stay_in_sample_order():
    def jitter(x):  # a random transform: the batched path must draw exactly as per-sample indexing does
        return x + torch.rand(1)

    dataset = _dataset(jitter)
    torch.manual_seed(5)
    batched = dataset.__getitems__([1, 2, 3])
    torch.manual_seed(5)
    reference = [dataset[i] for i in (1, 2, 3)]
    for (x, y), (ref_x, ref_y) in zip(batched, reference):
        assert torch.equal(x, ref_x) and torch.equal(y, ref_y)


def test_dataloader_batches_unchanged():
    dataset = _dataset()
    batches = list(DataLoader(dataset, batch_size=16, shuffle=False))
    x = torch.stack([dataset[i][0] for i in range(40)])
    assert torch.equal(torch.cat([b[0] for b in batches]), x)
