"""From the ``data`` and ``model`` sections to datasets, and to the model arguments the dataset decides.

Image datasets fill ``img_size``, ``in_chans`` and ``num_classes``; text fills ``vocab_size`` and checks the window
against the model's ``block_size``. A value the user gave for the model wins where it can (``model.img_size``
resizes the images); where it cannot (channels, classes, a patch size that does not divide the image), the error
names both values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from torch.utils.data import Dataset

from ...models.registry import model_defaults
from ..config.schema import TEXT_DATASET, TrainConfig

__all__ = ["TrainData", "is_language_model", "load_train_data"]


@dataclass(frozen=True)
class TrainData:
    """Datasets for training and evaluation; ``kind`` is ``"image"`` or ``"text"`` (a user model's run: also
    ``"classification"`` or ``"custom"``); ``model_args`` are the constructor arguments the data fixes (merged under
    the user's model options); ``loss_fn`` replaces the cross-entropy and ``collate_fn`` the DataLoader's default
    (see :mod:`layerscale.train.loop.objective` and :mod:`layerscale.train.user_model`)."""

    kind: str
    train: Dataset
    eval: Dataset | None
    model_args: dict[str, Any]
    description: str
    loss_fn: Callable[[Any, Any], Any] | None = None
    collate_fn: Callable[[list], Any] | None = None
    #: carved from the training split when ``data.validation_fraction > 0`` (``eval`` stays the test split)
    validation: Dataset | None = None
    #: ``(mean, std)`` per channel, [0, 1] pixel scale, that every image split is normalised with (the statistics of
    #: the whole training split, :func:`~layerscale.data.registry.load_dataset`; ``summary.json``'s
    #: ``normalization``); ``None`` for text and a user's own data
    normalization: tuple[tuple[float, ...], tuple[float, ...]] | None = None


def is_language_model(model_name: str) -> bool:
    """Whether the registry's model takes token ids (it has a ``vocab_size`` argument)."""
    return "vocab_size" in model_defaults(model_name)


def load_train_data(config: TrainConfig) -> TrainData:
    """Load the datasets of ``config.data`` for ``config.model``. Raises ``ValueError`` / ``FileNotFoundError`` /
    ``ImportError`` (from the data package) naming the problem."""
    data, model = config.data, config.model
    text = data.name == TEXT_DATASET
    if text != is_language_model(model.name):
        need = f"data.name: {TEXT_DATASET}" if not text else "an image dataset"
        raise ValueError(f"model {model.name!r} is {'a language' if not text else 'an image'} model, but data.name "
                         f"is {data.name!r}; it needs {need}")
    loaded = _load_text(config) if text else _load_images(config)
    if data.validation_fraction <= 0:
        return loaded
    from ...data.split import split_off_validation

    train, validation = split_off_validation(loaded.train, data.validation_fraction, data.split_seed)
    unit = "windows" if text else "images"
    return replace(loaded, train=train, validation=validation,
                   description=f"{loaded.description}; validation: {len(validation):,} {unit} carved from the "
                               f"training split (data.validation_fraction {data.validation_fraction:g}, "
                               f"{len(train):,} left to train on)")


def _load_text(config: TrainConfig) -> TrainData:
    from ...data.text import load_text

    data, model = config.data, config.model
    if data.path is None:
        raise ValueError(f"data.path is required for data.name: {TEXT_DATASET} (a text file or a folder of them)")
    model_block = model.options.get("block_size", model_defaults(model.name)["block_size"])
    block_size = data.block_size or model_block
    if block_size > model_block:
        raise ValueError(f"data.block_size {block_size} exceeds model.block_size {model_block} of model "
                         f"{model.name!r}; use data.block_size <= {model_block} or raise model.block_size")
    bundle = load_text(data.path, block_size, data.val_fraction)
    given = model.options.get("vocab_size")
    if given is not None and given < bundle.vocab_size:
        raise ValueError(f"model.vocab_size {given} is smaller than the byte vocabulary of {bundle.vocab_size} "
                         "tokens of the text dataset")
    return TrainData("text", bundle.train, bundle.val, {"vocab_size": bundle.vocab_size},
                     f"text {bundle.source}: {bundle.num_train_tokens:,} train / {bundle.num_val_tokens:,} "
                     f"eval bytes, windows of {block_size}")


def _load_images(config: TrainConfig) -> TrainData:
    from ...data.registry import load_dataset

    data, model = config.data, config.model
    model_img = model.options.get("img_size")
    if data.img_size is not None and model_img is not None and data.img_size != model_img:
        raise ValueError(f"data.img_size {data.img_size} and model.img_size {model_img} differ; give one of them "
                         "(the other follows)")
    bundle = load_dataset(data.name, data.path, augment=data.augment, img_size=data.img_size or model_img,
                          padding=data.padding, hflip=data.hflip, test_fraction=data.test_fraction,
                          seed=data.split_seed, validation_fraction=data.validation_fraction)
    fixed = {"img_size": bundle.img_size, "in_chans": bundle.in_chans, "num_classes": bundle.num_classes}
    for key in ("in_chans", "num_classes"):
        given = model.options.get(key)
        if given is not None and given != fixed[key]:
            raise ValueError(f"model.{key} {given} does not match dataset {bundle.name!r}, which has "
                             f"{fixed[key]} {'channels' if key == 'in_chans' else 'classes'}; leave model.{key} "
                             "unset to take it from the data")
    patch = model.options.get("patch_size", model_defaults(model.name).get("patch_size"))
    if isinstance(patch, int) and patch > 0 and bundle.img_size % patch:
        size = bundle.img_size
        divisors = [p for p in range(1, size + 1) if size % p == 0]
        raise ValueError(f"model {model.name!r} with patch_size {patch} cannot take the {size}x{size} images of "
                         f"dataset {bundle.name!r}: the image size must be a multiple of the patch size; set "
                         f"data.img_size to a multiple of {patch} (e.g. {-(-size // patch) * patch}) or "
                         f"model.patch_size to one of {divisors}")
    description = (f"{bundle.name}: {len(bundle.train):,} train / {len(bundle.test):,} test images, "
                   f"{bundle.in_chans}x{bundle.img_size}x{bundle.img_size}, {bundle.num_classes} classes")
    if bundle.validation is not None:  # an image folder's own val/ (then data.validation_fraction is 0)
        description += f"; validation: {len(bundle.validation):,} images (the folder's val/)"
    return TrainData("image", bundle.train, bundle.test, fixed, description, validation=bundle.validation,
                     normalization=(tuple(bundle.mean), tuple(bundle.std)))
