"""Deterministic stratified split for datasets that ship without a train/test split."""

from __future__ import annotations

import torch

from ..generator_seed import check_generator_seed
from ..messages import shown_value


def stratified_split(labels: torch.Tensor, test_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split indices `0..len(labels)-1` into (train, test), both sorted ascending.

    Each class contributes `round(count * test_fraction)` of its samples to test, chosen by a
    permutation from `torch.Generator().manual_seed(seed)`; the same labels and seed always give the
    same split, on any machine (torch's CPU generator is platform independent). ``labels`` must be a 1-D tensor of
    an integer dtype (a float label such as NaN would fall into no class and vanish from both parts).
    """
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or labels.dtype == torch.bool \
            or labels.is_floating_point() or labels.is_complex():
        shown = (f"a {labels.dim()}-D {labels.dtype} tensor" if isinstance(labels, torch.Tensor)
                 else type(labels).__name__)
        raise ValueError(f"labels must be a 1-D integer tensor, got {shown}")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) \
            or not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {shown_value(test_fraction)}")
    seed = check_generator_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    train_parts, test_parts = [], []
    for cls in torch.unique(labels).tolist():  # sorted, so the generator is consumed in a fixed order
        idx = torch.nonzero(labels == cls).flatten()
        idx = idx[torch.randperm(len(idx), generator=gen)]
        n_test = int(round(len(idx) * test_fraction))
        test_parts.append(idx[:n_test])
        train_parts.append(idx[n_test:])
    train = torch.cat(train_parts).sort().values
    test = torch.cat(test_parts).sort().values
    return train, test


def split_off_validation(dataset, fraction: float, seed: int):
    """``(train, validation)`` carved from a TRAINING dataset; the test split is never involved.

    - :class:`~layerscale.data.tensor_dataset.TensorImageDataset`: stratified by class with
      :func:`stratified_split` (``round(class_count * fraction)`` per class, chosen by ``seed``); the validation
      part keeps the normalisation and drops the training augmentation.
    - :class:`~layerscale.data.text.ByteWindowDataset`: the last ``round(n_tokens * fraction)`` tokens of the
      training text (split by position, like the corpus's own held-out part, so no window straddles the two).

    Raises ``ValueError`` for a fraction outside (0, 1), a dataset of another kind, or a split that leaves either
    part empty.
    """
    from .tensor_dataset import TensorImageDataset
    from .text import ByteWindowDataset

    if not 0.0 < fraction < 1.0:
        raise ValueError(f"data.validation_fraction must be in (0, 1) to split, got {fraction}")
    if isinstance(dataset, TensorImageDataset):
        train_idx, val_idx = stratified_split(dataset.labels, fraction, seed)
        if len(train_idx) == 0 or len(val_idx) == 0:
            raise ValueError(f"data.validation_fraction {fraction} of {len(dataset)} training images leaves "
                             f"{len(train_idx)} for training and {len(val_idx)} for validation; both must be > 0")

        def part(index: torch.Tensor, transform) -> TensorImageDataset:
            return TensorImageDataset(dataset.images[index], dataset.labels[index], dataset.mean.flatten().tolist(),
                                      dataset.std.flatten().tolist(), dataset.pixel_max, transform)

        return part(train_idx, dataset.transform), part(val_idx, None)
    if isinstance(dataset, ByteWindowDataset):
        n = dataset.tokens.numel()
        n_val = int(round(n * fraction))
        need = dataset.block_size + 1
        if n - n_val < need or n_val < need:
            raise ValueError(f"data.validation_fraction {fraction} of {n} training bytes gives {n - n_val} train / "
                             f"{n_val} validation bytes; each needs at least block_size + 1 = {need}")
        return (ByteWindowDataset(dataset.tokens[: n - n_val], dataset.block_size),
                ByteWindowDataset(dataset.tokens[n - n_val :], dataset.block_size))
    raise ValueError(f"data.validation_fraction needs an in-memory image or text dataset, got "
                     f"{type(dataset).__name__}")
