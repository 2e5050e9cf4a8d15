"""`load_dataset`: one entry point from a dataset name to model-ready train/test datasets."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from ..machine import machine_memory_bytes
from ..messages import shown_value
from .bundle import ImageDataBundle, RawImageData
from .tensor_dataset import TensorImageDataset, channel_stats, check_normalization
from .transforms import check_padding, train_augmentation

# name: (crop padding at the native size, horizontal flip on by default).
# Flips stay off for digits and MNIST (a mirrored 2, 3, 7 is not the same digit) and, conservatively,
# for Fashion-MNIST, whose standard baselines train without them; pass hflip=True to opt in.
_DEFAULTS: dict[str, tuple[int, bool]] = {
    "digits": (1, False),
    "mnist": (2, False),
    "fashion-mnist": (2, False),
    "cifar10": (4, True),
    "cifar100": (4, True),
    "imagefolder": (4, True),  # at 32x32; scaled with img_size like the others
}
DATASET_NAMES: tuple[str, ...] = tuple(_DEFAULTS)
_DEFAULT_IMAGEFOLDER_SIZE = 32


def _canonical(name: str) -> str:
    if not isinstance(name, str):
        raise ValueError(f"dataset name must be a string, one of {', '.join(DATASET_NAMES)}; got "
                         f"{shown_value(name)}")
    key = name.strip().lower().replace("_", "-")
    key = {"fashionmnist": "fashion-mnist", "cifar-10": "cifar10", "cifar-100": "cifar100"}.get(key, key)
    if key not in _DEFAULTS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASET_NAMES)}")
    return key


def _read(name: str, data_dir: str | Path | None, img_size: int | None, test_fraction: float, seed: int,
          validation_fraction: float) -> RawImageData:
    # Readers are imported here so that each optional dependency is only touched when asked for.
    if name == "digits":
        if data_dir is not None:  # a path given for the embedded set would be ignored: say so
            raise ValueError(f"dataset 'digits' is embedded (scikit-learn's load_digits) and reads no files; got the "
                             f"data path {str(data_dir)!r}: leave the path out, or name the dataset stored there")
        from .digits import read_digits

        return read_digits(test_fraction, seed)
    if name in ("mnist", "fashion-mnist"):
        from .idx import read_mnist_like

        return read_mnist_like(name, data_dir)
    if name in ("cifar10", "cifar100"):
        from .cifar import read_cifar

        return read_cifar(name, data_dir)
    from .imagefolder import read_imagefolder

    return read_imagefolder(data_dir, img_size or _DEFAULT_IMAGEFOLDER_SIZE, test_fraction, seed, validation_fraction)


def _check_resize_fits(name: str, count: int, channels: int, size: int, chunk: int = 4096) -> None:
    """``ValueError`` when resizing ``count`` images to ``size`` x ``size`` needs more than this machine's memory:
    the resized uint8 images plus one float32 chunk (:func:`_resize`), counted before anything is allocated."""
    needed = count * channels * size * size + min(count, chunk) * channels * size * size * 4
    memory = machine_memory_bytes()
    if memory is not None and needed > memory:
        raise ValueError(f"img_size {size}: resizing the {count:,} images of dataset {name!r} to {size}x{size} "
                         f"needs {needed / 2**30:,.1f} GiB, more than this machine's {memory / 2**30:,.1f} GiB; "
                         f"choose a smaller img_size")


def _resize(images: torch.Tensor, size: int, pixel_max: float, chunk: int = 4096) -> torch.Tensor:
    """Bilinear (antialiased) resize of uint8 (N, C, H, W) to (N, C, size, size), rounded back to uint8."""
    out = []
    for start in range(0, images.shape[0], chunk):  # chunked: a float copy of all of CIFAR is 600 MB
        x = images[start : start + chunk].to(torch.float32)
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
        out.append(x.round_().clamp_(0, pixel_max).to(torch.uint8))
    return torch.cat(out) if out else images.new_empty((0, images.shape[1], size, size))


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    augment: bool = False,
    img_size: int | None = None,
    padding: int | None = None,
    hflip: bool | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    generator: torch.Generator | None = None,
    validation_fraction: float = 0.0,
) -> ImageDataBundle:
    """Load an image-classification dataset by name into memory, ready for a DataLoader.

    Names (see `DATASET_NAMES`): `digits` (scikit-learn, no files; a `data_dir` is refused), `mnist`,
    `fashion-mnist` (IDX files; Fashion-MNIST defaults to the Debian package's folder), `cifar10`,
    `cifar100` (python-pickle folders), `imagefolder` (one sub-folder per class; `img_size` default 32).
    `img_size` resizes any dataset to img_size x img_size (bilinear, antialiased). `test_fraction` and
    `seed` only matter for datasets without an official split (digits, a flat image folder). An image folder with
    `train/`, `val/` and `test/` has a validation split of its own, `val/` (returned as `validation`); the share of
    the training split that training will carve as validation, `validation_fraction`, must then be 0
    (:func:`~layerscale.data.imagefolder.read_imagefolder`).

    Normalisation: `mean`/`std` per channel are computed exactly from the whole training split and applied
    to both splits (a pretrained model's own instead: :func:`renormalized`). A validation part that training
    carves from the training split later (`data.validation_fraction`,
    :func:`layerscale.train.setup.data_setup.load_train_data`) is inside these statistics, as it is inside the
    per-dataset constants usually published (computed over a dataset's whole training split): two numbers per
    channel, no label. A run records them in `summary.json` (`normalization`). Augmentation (training split only,
    when `augment`): random crop with zero padding
    `padding` (default 1 / 2 / 4 pixels at 8 / 28 / 32 px, scaled with `img_size`), then a horizontal
    flip if `hflip` (default on for cifar10/cifar100/imagefolder only). Random draws come from
    `generator` if given, else from the global torch RNG (see `layerscale.data.transforms`).

    Raises ValueError for an unknown name (listing the known ones) or a corrupt file,
    FileNotFoundError naming a missing file or folder, ImportError naming a missing optional package.
    """
    key = _canonical(name)
    if img_size is not None:
        if isinstance(img_size, bool) or not isinstance(img_size, numbers.Integral) or img_size < 1:
            raise ValueError(f"img_size must be a positive integer (or None), got {shown_value(img_size)}")
        img_size = int(img_size)
    if padding is not None:
        check_padding(padding)
    raw = _read(key, data_dir, img_size, test_fraction, seed, validation_fraction)
    train_images, test_images, validation_images = raw.train_images, raw.test_images, raw.validation_images
    native = train_images.shape[-1]
    size = img_size or native
    if size != native:
        held_out = validation_images.shape[0] if validation_images is not None else 0
        _check_resize_fits(key, train_images.shape[0] + test_images.shape[0] + held_out, train_images.shape[1],
                           size)
        train_images = _resize(train_images, size, raw.pixel_max)
        test_images = _resize(test_images, size, raw.pixel_max)
        if validation_images is not None:
            validation_images = _resize(validation_images, size, raw.pixel_max)
    mean, std = channel_stats(train_images, raw.pixel_max)

    transform = None
    if augment:
        native_pad, default_flip = _DEFAULTS[key]
        reference = _DEFAULT_IMAGEFOLDER_SIZE if key == "imagefolder" else native
        pad = padding if padding is not None else max(1, round(native_pad * size / reference))
        transform = train_augmentation(pad, default_flip if hflip is None else hflip, generator)

    def dataset(images: torch.Tensor, labels: torch.Tensor, tf=None) -> TensorImageDataset:
        return TensorImageDataset(images, labels, mean, std, raw.pixel_max, tf)

    return ImageDataBundle(
        name=key,
        train=dataset(train_images, raw.train_labels, transform),
        test=dataset(test_images, raw.test_labels),
        num_classes=len(raw.class_names),
        in_chans=train_images.shape[1],
        img_size=size,
        class_names=list(raw.class_names),
        mean=mean,
        std=std,
        validation=dataset(validation_images, raw.validation_labels) if validation_images is not None else None,
    )


def renormalized(bundle: ImageDataBundle, normalization: tuple[Sequence[float], Sequence[float]]) -> ImageDataBundle:
    """``bundle`` with every split normalised by ``normalization`` = ``(mean, std)`` — a pretrained model's own, in
    the [0, 1] pixel scale, one value per channel — instead of its training split's statistics (the image tensors
    are shared, nothing is re-read). A one-line ``ValueError`` for a bad ``normalization``."""
    mean, std = check_normalization(normalization, bundle.in_chans)

    def again(data: TensorImageDataset) -> TensorImageDataset:
        return TensorImageDataset(data.images, data.labels, mean, std, data.pixel_max, data.transform)

    validation = again(bundle.validation) if bundle.validation is not None else None
    return replace(bundle, train=again(bundle.train), test=again(bundle.test), validation=validation, mean=mean,
                   std=std)
