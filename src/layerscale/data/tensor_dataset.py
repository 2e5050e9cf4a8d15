"""An in-memory image dataset: whole small datasets fit as one uint8 tensor, which is fast on CPU."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import torch
from torch.utils.data import Dataset

from ..messages import shown_value


def _check_pixel_max(pixel_max: object) -> float:
    """``pixel_max`` as a float, or a one-line ``ValueError``: it divides every pixel, so it must be finite and > 0."""
    if isinstance(pixel_max, bool) or not isinstance(pixel_max, numbers.Real) or not math.isfinite(pixel_max) \
            or pixel_max <= 0:
        raise ValueError(f"pixel_max must be a finite number > 0, got {shown_value(pixel_max)}")
    return float(pixel_max)


def _check_channel_values(name: str, values: torch.Tensor, positive: bool) -> None:
    """Each of ``values`` (a per-channel mean or std) finite, and > 0 for a std (it divides): a one-line
    ``ValueError`` naming the first bad channel otherwise."""
    bad = ~torch.isfinite(values) | (values <= 0 if positive else torch.zeros_like(values, dtype=torch.bool))
    if bad.any():
        channel = int(torch.nonzero(bad.flatten())[0])
        raise ValueError(f"{name}[{channel}] must be a finite number{' > 0' if positive else ''}, got "
                         f"{values.flatten()[channel].item()!r}")


def channel_stats(images: torch.Tensor, pixel_max: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Exact per-channel mean and (population) std of `images / pixel_max`.

    `images` is uint8 (N, C, H, W). Uses a 256-bin histogram per channel, so it is exact and needs no
    float copy of the dataset (CIFAR-10 as float64 would be 1.2 GB). A channel with zero variance
    gets std 1.0 so that normalising never divides by zero (a constant channel, such as an all-black one, is real
    data). ``pixel_max`` must be finite and > 0, and there must be at least one pixel per channel.
    """
    if images.dtype != torch.uint8 or images.dim() != 4:
        raise ValueError(f"expected uint8 images of shape (N, C, H, W), got {images.dtype} {tuple(images.shape)}")
    pixel_max = _check_pixel_max(pixel_max)
    if images.shape[0] * images.shape[2] * images.shape[3] == 0:
        raise ValueError(f"images of shape {tuple(images.shape)} have no pixels; expected at least one image with "
                         f"pixels to take channel statistics of")
    values = torch.arange(256, dtype=torch.float64) / pixel_max
    means, stds = [], []
    for c in range(images.shape[1]):
        counts = torch.bincount(images[:, c].reshape(-1), minlength=256).to(torch.float64)
        n = counts.sum()
        mean = (counts * values).sum() / n
        var = (counts * (values - mean) ** 2).sum() / n
        std = var.sqrt().item()
        means.append(mean.item())
        stds.append(std if std > 0 else 1.0)
    return tuple(means), tuple(stds)


def check_normalization(normalization: object, channels: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(mean, std)`` given for ``channels`` channels (a pretrained model's own, e.g. timm's ``pretrained_cfg``) as
    tuples of floats, or a one-line ``ValueError``: two sequences of ``channels`` finite numbers, every std > 0."""
    if not isinstance(normalization, (tuple, list)) or len(normalization) != 2:
        raise ValueError(f"normalization must be (mean, std), got {shown_value(normalization)}")
    out = []
    for name, values in zip(("mean", "std"), normalization):
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != channels or any(
                isinstance(v, bool) or not isinstance(v, numbers.Real) for v in values):
            raise ValueError(f"normalization {name} must be {channels} number(s), one per channel, got "
                             f"{shown_value(values)}")
        _check_channel_values(name, torch.tensor([float(v) for v in values], dtype=torch.float64), name == "std")
        out.append(tuple(float(v) for v in values))
    return out[0], out[1]


class TensorImageDataset(Dataset):
    """Images held as one uint8 tensor, normalised on access.

    `__getitem__(i)` returns `(x, y)`: `x = (transform(images[i] / pixel_max) - mean) / std` as float32
    (C, H, W), `y = labels[i]` as an int64 scalar tensor. The transform (if any) sees the image in
    [0, 1] before normalisation, so zero padding in a random crop is black, as in the usual pipelines.
    """

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        mean: Sequence[float],
        std: Sequence[float],
        pixel_max: float = 255.0,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        if images.dim() != 4:
            raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
        if labels.shape != (images.shape[0],):
            raise ValueError(f"{images.shape[0]} images but labels of shape {tuple(labels.shape)}")
        if labels.dtype == torch.bool or labels.is_floating_point() or labels.is_complex():
            raise ValueError(f"labels must be an integer tensor (class indices), got dtype {labels.dtype}")
        channels = images.shape[1]
        if len(mean) != channels or len(std) != channels:
            raise ValueError(f"mean/std need {channels} values, got {len(mean)} and {len(std)}")
        self.mean = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
        _check_channel_values("mean", self.mean, positive=False)
        _check_channel_values("std", self.std, positive=True)
        self.pixel_max = _check_pixel_max(pixel_max)
        self.images = images.contiguous()
        self.labels = labels.to(torch.int64)
        self.transform = transform

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.images[index].to(torch.float32).div_(self.pixel_max)
        if self.transform is not None:
            x = self.transform(x)
        return (x - self.mean) / self.std, self.labels[index]

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The samples ``[self[i] for i in indices]``, normalised in one pass over the batch when there is no transform.

        ``DataLoader`` calls this once per batch instead of ``__getitem__`` per sample. The arithmetic is the same
        element-wise division and subtraction as :meth:`__getitem__` (each element correctly rounded), so the samples
        are bit for bit those of ``__getitem__``; with a transform (random augmentation) the samples are built one by
        one, in order, so the random draws are unchanged too.
        """
        if self.transform is not None:
            return [self[i] for i in indices]
        index = torch.as_tensor(indices, dtype=torch.int64)
        x = (self.images[index].to(torch.float32).div_(self.pixel_max) - self.mean) / self.std
        return list(zip(x.unbind(0), self.labels[index].unbind(0)))
