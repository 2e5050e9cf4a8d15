"""CIFAR-10 / CIFAR-100 in the "python version" directory format, read through the safe unpickler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .bundle import RawImageData
from .safe_pickle import _require_numpy, safe_load_pickle

_SPECS = {
    # name: (sub-folder of the archive, train files, test file, meta file, label key, names key, classes)
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], "test_batch",
                "batches.meta", "labels", "label_names", 10),
    "cifar100": ("cifar-100-python", ["train"], "test", "meta", "fine_labels", "fine_label_names", 100),
}  # fmt: skip


def _as_str_keys(obj: Any, path: Path) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a pickled dict, got {type(obj).__name__}")
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def _read_batch(path: Path, label_key: str, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    np = _require_numpy()
    batch = _as_str_keys(safe_load_pickle(path), path)
    data, labels = batch.get("data"), batch.get(label_key)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        got = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise ValueError(f"{path}: 'data' must be a uint8 array of shape (N, 3072), got {got}")
    if labels is None or len(labels) != data.shape[0]:
        count = "none" if labels is None else len(labels)
        raise ValueError(f"{path}: '{label_key}' has {count} entries, expected {data.shape[0]} (one per image)")
    labels_t = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    if labels_t.numel() and not (0 <= int(labels_t.min()) and int(labels_t.max()) < num_classes):
        raise ValueError(f"{path}: labels must be in 0..{num_classes - 1}")
    # copy(): arrays rebuilt from a pickle may be read-only, which torch.from_numpy warns about.
    return torch.from_numpy(data.copy()).reshape(-1, 3, 32, 32), labels_t


def read_cifar(name: str, data_dir: str | Path | None) -> RawImageData:
    """Read `cifar10` (`data_batch_1..5`, `test_batch`, `batches.meta`) or `cifar100` (`train`, `test`,
    `meta`, fine labels) from `data_dir`, which may be the extracted folder itself
    (`cifar-10-batches-py` / `cifar-100-python`) or its parent.

    Images are uint8 (N, 3, 32, 32). Raises FileNotFoundError naming a missing file, ValueError naming
    a file that is corrupt, inconsistent or references anything beyond numpy arrays.
    """
    folder, train_files, test_file, meta_file, label_key, names_key, num_classes = _SPECS[name]
    if data_dir is None:
        raise ValueError(f"{name}: no data directory given; set data.path to the {folder} folder or its parent "
                         "(--data-path DIR, --set data.path=DIR)")
    directory = Path(data_dir)
    if (directory / folder).is_dir():
        directory = directory / folder
    elif not directory.is_dir():
        raise FileNotFoundError(f"{directory}: data directory for {name} not found")
    parts = [_read_batch(directory / f, label_key, num_classes) for f in train_files]
    test_images, test_labels = _read_batch(directory / test_file, label_key, num_classes)
    meta_path = directory / meta_file
    names = _as_str_keys(safe_load_pickle(meta_path), meta_path).get(names_key)
    if not isinstance(names, list) or len(names) != num_classes:
        raise ValueError(f"{meta_path}: '{names_key}' must list {num_classes} class names")
    return RawImageData(
        train_images=torch.cat([p[0] for p in parts]),
        train_labels=torch.cat([p[1] for p in parts]),
        test_images=test_images,
        test_labels=test_labels,
        class_names=[n.decode("latin1") if isinstance(n, bytes) else str(n) for n in names],
    )
