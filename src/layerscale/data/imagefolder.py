"""A folder of images, one sub-folder per class, read with Pillow and resized to a square."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..messages import shown_name
from ..untrusted_files import folder_files, visible_entries
from .bundle import RawImageData
from .split import stratified_split

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg"})


def _require_pil() -> Any:
    try:
        from PIL import Image, ImageOps
    except ImportError as err:
        raise ImportError(
            "the 'imagefolder' dataset needs Pillow: pip install pillow (it also comes with matplotlib)"
        ) from err
    return Image, ImageOps


def _class_dirs(root: Path) -> list[Path]:
    """The class folders of ``root``: its non-hidden sub-folders (``.ipynb_checkpoints``, ``.git`` are never
    classes). A symbolic link or special file among them is refused in one line
    (:func:`~layerscale.untrusted_files.visible_entries`)."""
    return visible_entries(root, "image folder", expected="one sub-folder per class")[1]


def _image_files(cls_dir: Path) -> list[Path]:
    """The images of one class folder, recursively (:func:`~layerscale.untrusted_files.folder_files`: hidden
    entries passed over, links and special files refused); a ``ValueError`` when it holds none: every sub-folder is
    a class, and an empty one would add an output no example can have."""
    files = [path for _, path in folder_files(cls_dir, "image folder") if path.suffix.lower() in IMAGE_SUFFIXES]
    if not files:
        raise ValueError(f"{shown_name(str(cls_dir))}: a class folder with no {'/'.join(sorted(IMAGE_SUFFIXES))} "
                         f"image; every sub-folder is a class: add images or remove it")
    return files


def _read_images(root: Path, classes: list[str], img_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    Image, ImageOps = _require_pil()
    images, labels = [], []
    for label, cls in enumerate(classes):
        cls_dir = root / cls
        if not cls_dir.is_dir():
            continue  # a test split may lack some of the train split's classes (a link was refused before)
        for path in _image_files(cls_dir):
            try:
                with Image.open(path) as img:
                    # fit = resize the shorter side then centre-crop, so aspect ratio is kept.
                    img = ImageOps.fit(img.convert("RGB"), (img_size, img_size), method=Image.BILINEAR)
                    data = bytearray(img.tobytes())
            except OSError as err:  # UnidentifiedImageError is an OSError
                raise ValueError(f"{path}: not a readable image ({err})") from err
            images.append(torch.frombuffer(data, dtype=torch.uint8).view(img_size, img_size, 3))
            labels.append(label)
    if not images:
        raise ValueError(f"{root}: no {'/'.join(sorted(IMAGE_SUFFIXES))} images found in class folders {classes}")
    return torch.stack(images).permute(0, 3, 1, 2).contiguous(), torch.tensor(labels, dtype=torch.int64)


def read_imagefolder(
    data_dir: str | Path | None, img_size: int, test_fraction: float = 0.2, seed: int = 0,
    validation_fraction: float = 0.0,
) -> RawImageData:
    """Read RGB images (`.png`, `.jpg`, `.jpeg`) from class sub-folders, as uint8 (N, 3, img_size, img_size).

    Layouts, as torchvision's and timm's folder datasets name the splits:

    - `data_dir/train/<class>/...` with `data_dir/test/<class>/...`: the training and test splits; without `test/`,
      `data_dir/val/<class>/...` is the test split (ImageNet's layout, whose `val/` is its held-out split);
    - `train/`, `val/` and `test/`: `val/` is the validation split (returned as `validation_*`); carving another
      one from `train/` as well (`validation_fraction` > 0) is ambiguous and refused before any image is read;
    - plain `data_dir/<class>/...`, split by `stratified_split(labels, test_fraction, seed)`.

    Classes are the sorted train sub-folder names; a test or validation class absent from train is an error.
    Images are resized on their shorter side and centre-cropped. The folder is read as made by someone else: hidden entries
    (`.ipynb_checkpoints/`, `._x.png`) are passed over, a symbolic link or special file inside it is
    refused by name, never followed (`data_dir` itself may be a link: the path the user gave). Raises
    ImportError without Pillow, FileNotFoundError for a missing directory, ValueError for an empty
    folder, a class folder without images, a link, an unreadable image or the ambiguous validation split.
    """
    if data_dir is None:
        raise ValueError("imagefolder: no data directory given; set data.path to a folder with one sub-folder per "
                         "class (--data-path DIR, --set data.path=DIR)")
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: image folder not found")
    root = root.resolve() if root.is_symlink() else root
    validation_root = None
    if (root / "train").is_dir():
        train_root = root / "train"
        test_root = next((root / n for n in ("test", "val") if (root / n).is_dir()), None)
        if test_root is None:
            raise FileNotFoundError(f"{root}: has train/ but no test/ or val/ folder")
        if test_root.name == "test" and (root / "val").is_dir():
            validation_root = root / "val"
            if validation_fraction > 0:
                raise ValueError(f"{root}: has train/, val/ and test/, and val/ is the validation split; "
                                 f"validation_fraction {validation_fraction:g} would carve a second one from "
                                 "train/: set it to 0, or move val/ out of the folder")
    else:
        train_root, test_root = root, None
    classes = [p.name for p in _class_dirs(train_root)]
    if not classes:
        raise ValueError(f"{train_root}: no class sub-folders found")
    images, labels = _read_images(train_root, classes, img_size)
    if test_root is None:
        train_idx, test_idx = stratified_split(labels, test_fraction, seed)
        train_images, train_labels = images[train_idx], labels[train_idx]
        test_images, test_labels = images[test_idx], labels[test_idx]
    else:
        for held_out in filter(None, (test_root, validation_root)):
            unknown = sorted({p.name for p in _class_dirs(held_out)} - set(classes))
            if unknown:
                raise ValueError(f"{held_out}: classes {unknown} are not in {train_root}")
        train_images, train_labels = images, labels
        test_images, test_labels = _read_images(test_root, classes, img_size)
    validation_images, validation_labels = (_read_images(validation_root, classes, img_size)
                                            if validation_root is not None else (None, None))
    return RawImageData(train_images, train_labels, test_images, test_labels, classes,
                        validation_images=validation_images, validation_labels=validation_labels)
