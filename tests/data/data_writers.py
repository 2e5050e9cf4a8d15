"""Writers for tiny files in each on-disk format the data package reads; tests build their own data.

A plain module with a unique name (not conftest.py), so that `import` cannot pick up another test
folder's helpers.
"""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np


def write_idx(path: Path, array: np.ndarray, *, gz: bool = False) -> Path:
    """Write `array` (uint8) as an IDX file: magic 00 00 08 ndim, big-endian dims, raw bytes."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    payload = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
        payload = gzip.compress(payload)
    path.write_bytes(payload)
    return path


def write_mnist_dir(root: Path, *, n_train: int = 12, n_test: int = 6, size: int = 28, gz: bool = False, seed: int = 0):
    """Four IDX files like MNIST's; returns the arrays written (images (N, H, W), labels (N,))."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, size, size), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        write_idx(root / f"{prefix}-images-idx3-ubyte", images, gz=gz)
        write_idx(root / f"{prefix}-labels-idx1-ubyte", labels, gz=gz)
        out[prefix] = (images, labels)
    return out


def _dump(path: Path, obj) -> None:
    with path.open("wb") as f:
        pickle.dump(obj, f)


def write_cifar10_dir(parent: Path, *, per_batch: int = 4, n_test: int = 3, seed: int = 0) -> Path:
    """A `cifar-10-batches-py` folder like the real one: dicts with 'data' uint8 (N, 3072) and 'labels'."""
    rng = np.random.default_rng(seed)
    folder = parent / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for i in range(1, 6):
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size=per_batch)]
        _dump(folder / f"data_batch_{i}", {"batch_label": f"training batch {i} of 5", "data": data, "labels": labels})
    data = rng.integers(0, 256, size=(n_test, 3072), dtype=np.uint8)
    _dump(folder / "test_batch", {"data": data, "labels": [int(v) for v in rng.integers(0, 10, size=n_test)]})
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    _dump(folder / "batches.meta", {"label_names": names, "num_cases_per_batch": per_batch})
    return folder


def write_cifar100_dir(parent: Path, *, n_train: int = 8, n_test: int = 4, seed: int = 0) -> Path:
    """A `cifar-100-python` folder: 'train', 'test' with 'fine_labels' and 'coarse_labels', and 'meta'."""
    rng = np.random.default_rng(seed)
    folder = parent / "cifar-100-python"
    folder.mkdir(parents=True)
    for name, n in (("train", n_train), ("test", n_test)):
        _dump(folder / name, {
            "data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
            "fine_labels": [int(v) for v in rng.integers(0, 100, size=n)],
            "coarse_labels": [int(v) for v in rng.integers(0, 20, size=n)],
        })  # fmt: skip
    _dump(folder / "meta", {"fine_label_names": [f"class{i}" for i in range(100)],
                            "coarse_label_names": [f"super{i}" for i in range(20)]})  # fmt: skip
    return folder

