"""scikit-learn's bundled 8x8 digits: a real dataset that needs no download, for quick studies on CPU."""

from __future__ import annotations

import torch

from .bundle import RawImageData
from .split import stratified_split

DIGITS_PIXEL_MAX = 16.0  # load_digits pixels are integers 0..16 (counts of set pixels in 4x4 blocks)


def read_digits(test_fraction: float = 0.2, seed: int = 0) -> RawImageData:
    """All 1797 images of `sklearn.datasets.load_digits` as 1x8x8 uint8 (values 0..16), ten classes.

    Split: stratified, `round(class_count * test_fraction)` per class to test, chosen with `seed`
    (see `stratified_split`); with the defaults 1438 train / 359 test, identical on every call.
    Raises ImportError naming the `torch-layerscale[data]` extra if scikit-learn is missing.
    """
    try:
        from sklearn.datasets import load_digits  # lazy: scikit-learn is an optional extra
    except ImportError as err:
        raise ImportError(
            "the 'digits' dataset needs scikit-learn: pip install 'torch-layerscale[data]'"
        ) from err
    digits = load_digits()
    images = torch.as_tensor(digits.images).round().to(torch.uint8).unsqueeze(1)
    labels = torch.as_tensor(digits.target, dtype=torch.int64)
    train_idx, test_idx = stratified_split(labels, test_fraction, seed)
    return RawImageData(
        train_images=images[train_idx],
        train_labels=labels[train_idx],
        test_images=images[test_idx],
        test_labels=labels[test_idx],
        class_names=[str(d) for d in range(10)],
        pixel_max=DIGITS_PIXEL_MAX,
    )
