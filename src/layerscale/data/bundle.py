"""Small dataclasses describing a loaded dataset: what a model needs to know to be built for it."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import Dataset


@dataclass(frozen=True)
class RawImageData:
    """Undecorated output of one format reader, before statistics, resizing and augmentation.

    `*_images` are uint8 tensors of shape (N, C, H, W) holding values 0..`pixel_max`;
    `*_labels` are int64 tensors of shape (N,). `validation_*` are `None` unless the source ships a validation
    split of its own (an image folder with `train/`, `val/` and `test/`).
    """

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    class_names: list[str]
    pixel_max: float = 255.0
    validation_images: torch.Tensor | None = None
    validation_labels: torch.Tensor | None = None


@dataclass(frozen=True)
class ImageDataBundle:
    """A loaded image-classification dataset.

    `train`, `test` and `validation` (`None` unless the source has a validation split of its own: an image folder's
    `val/` beside `test/`) yield `(image, label)` with `image` float32 of shape (`in_chans`, `img_size`,
    `img_size`), normalised as `(pixel / pixel_max - mean) / std` per channel, and `label` an int64
    scalar in `[0, num_classes)`. `mean` and `std` are computed once from the training split (in the
    [0, 1] pixel scale) and reused for the other splits.
    """

    name: str
    train: Dataset
    test: Dataset
    num_classes: int
    in_chans: int
    img_size: int
    class_names: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    validation: Dataset | None = None


@dataclass(frozen=True)
class TextDataBundle:
    """A byte-level text corpus split by position: the first part is `train`, the last `val_fraction` is `val`.

    Items are `(x, y)` int64 tensors of length `block_size` with `y[t] == x[t + 1]` in the corpus;
    `vocab_size` is 256 (raw bytes). `val` is None when the bundle was loaded with `val_fraction=0`.
    """

    train: Dataset
    val: Dataset | None
    vocab_size: int
    block_size: int
    num_train_tokens: int
    num_val_tokens: int
    source: str
