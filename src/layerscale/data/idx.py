"""IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed, read with torch alone."""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib
from pathlib import Path

import torch

from ..paths import refuse_non_file
from .bundle import RawImageData

# Where Debian's package `dataset-fashion-mnist` installs the four .gz files.
FASHION_MNIST_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")

FASHION_MNIST_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]  # fmt: skip
MNIST_CLASSES = [str(d) for d in range(10)]

_UBYTE = 0x08
#: The most bytes an IDX file's header may declare (the largest real one, MNIST's or Fashion-MNIST's train images,
#: declares 47 MB); a file, or a gzip file once decompressed, is read only up to what its header declares.
MAX_IDX_BYTES = 1 << 30
_GZIP_MAGIC = b"\x1f\x8b"


def _read_idx_bytes(path: Path, ndim: int) -> tuple[tuple[int, ...], bytes]:
    """``(dims, payload)`` of an IDX file, plain or gzip (told by content, not by name: people gunzip files and keep
    the name, or the reverse). The header is read first and the payload only up to the size it declares, so neither
    a header declaring huge dimensions nor a small gzip file that expands to gigabytes allocates more than
    :data:`MAX_IDX_BYTES`."""
    with path.open("rb") as raw:
        compressed = raw.read(2) == _GZIP_MAGIC
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
        try:
            header = stream.read(4 + 4 * ndim)
            expected_magic = bytes([0, 0, _UBYTE, ndim])
            if header[:4] != expected_magic:
                raise ValueError(
                    f"{path}: not an unsigned-byte IDX file with {ndim} dimension(s): "
                    f"magic number {header[:4].hex()}, expected {expected_magic.hex()}"
                )
            if len(header) < 4 + 4 * ndim:
                raise ValueError(f"{path}: truncated IDX header ({len(header)} bytes, expected at least "
                                 f"{4 + 4 * ndim})")
            dims = struct.unpack(f">{ndim}I", header[4:])
            size = math.prod(dims)
            if size > MAX_IDX_BYTES:
                raise ValueError(f"{path}: the header's shape {dims} needs {size} bytes; an IDX file of images or "
                                 f"labels holds at most {MAX_IDX_BYTES} bytes")
            payload = stream.read(size + 1)  # one byte more tells trailing data
        except (EOFError, OSError, zlib.error) as err:
            if not compressed:
                raise
            raise ValueError(f"{path}: corrupt or truncated gzip data ({err})") from err
        file_size = os.fstat(raw.fileno()).st_size
    expected = len(header) + size
    if len(payload) != size:
        problem, got = (("truncated", f"{len(header) + len(payload)} bytes") if len(payload) < size else
                        ("trailing data", f"more than {expected} bytes once decompressed" if compressed
                         else f"{file_size} bytes"))
        raise ValueError(f"{path}: {problem}: {got}, but the header's shape {dims} needs {expected}")
    return dims, payload


def read_idx(path: str | Path, ndim: int) -> torch.Tensor:
    """Read an unsigned-byte IDX file with `ndim` dimensions into a uint8 tensor of the header's shape.

    Raises ValueError naming the file when the magic number is not `00 00 08 <ndim>`, when the header declares
    more than `MAX_IDX_BYTES` bytes (refused before anything is allocated or decompressed), or when the
    payload is shorter (truncated) or longer (trailing data) than the header's dimensions require, and when `path`
    is no regular file (a directory, a FIFO, a device: named, never opened, since a FIFO would block forever).
    """
    refuse_non_file(path, "an IDX file")
    dims, payload = _read_idx_bytes(Path(path), ndim)
    # bytearray: frombuffer needs a writable buffer to avoid sharing read-only memory with torch.
    return torch.frombuffer(bytearray(payload), dtype=torch.uint8).reshape(dims)


def _find(directory: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz"):
        refuse_non_file(directory / name, "an IDX file")  # a FIFO or a folder is named as what it is
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(f"{directory / stem}[.gz]: file not found")


def _read_split(directory: Path, prefix: str, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    images_path = _find(directory, f"{prefix}-images-idx3-ubyte")
    labels_path = _find(directory, f"{prefix}-labels-idx1-ubyte")
    images = read_idx(images_path, 3)
    labels = read_idx(labels_path, 1).to(torch.int64)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(
            f"{labels_path}: {labels.shape[0]} labels, expected {images.shape[0]} to match {images_path}"
        )
    if images.shape[1] != images.shape[2]:
        raise ValueError(f"{images_path}: images are {images.shape[1]}x{images.shape[2]}, expected square")
    if labels.numel() and int(labels.max()) >= num_classes:
        raise ValueError(f"{labels_path}: label {int(labels.max())} found, expected labels 0..{num_classes - 1}")
    return images.unsqueeze(1), labels


def read_mnist_like(name: str, data_dir: str | Path | None) -> RawImageData:
    """Read `mnist` or `fashion-mnist` from a directory holding `train-images-idx3-ubyte`,
    `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte` (each optionally `.gz`).

    `data_dir=None` means `FASHION_MNIST_DEBIAN_DIR` for fashion-mnist, and is an error for mnist.
    Raises FileNotFoundError naming the missing file or directory, ValueError for a corrupt file or
    train/test images of different sizes.
    """
    if data_dir is None:
        if name != "fashion-mnist":
            raise ValueError(
                f"{name}: no data directory given; set data.path to a folder (--data-path DIR, --set data.path=DIR) "
                "holding "
                "train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], "
                "t10k-labels-idx1-ubyte[.gz]"
            )
        directory = FASHION_MNIST_DEBIAN_DIR
        try:
            _find(directory, "train-images-idx3-ubyte")
        except FileNotFoundError:
            raise FileNotFoundError(
                f"Fashion-MNIST not found in {directory}: install the Debian package dataset-fashion-mnist "
                "(apt-get install dataset-fashion-mnist) or set data.path to a folder with the four IDX files "
                "(--data-path DIR, --set data.path=DIR)"
            ) from None
    else:
        directory = Path(data_dir)
        if not directory.is_dir():
            raise FileNotFoundError(f"{directory}: data directory for {name} not found")
    train_images, train_labels = _read_split(directory, "train", 10)
    test_images, test_labels = _read_split(directory, "t10k", 10)
    if train_images.shape[1:] != test_images.shape[1:]:
        raise ValueError(
            f"{directory}: train images are {tuple(train_images.shape[2:])} but test images "
            f"{tuple(test_images.shape[2:])}; expected the same size"
        )
    return RawImageData(
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        class_names=list(FASHION_MNIST_CLASSES if name == "fashion-mnist" else MNIST_CLASSES),
    )
