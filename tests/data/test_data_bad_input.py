"""Bad arguments to the data package are refused in one line naming the argument (no NaN outputs, no silent
truncation, no raw torch or operator errors)."""
from __future__ import annotations

import pytest
import torch

from layerscale.data import TensorImageDataset, channel_stats, load_dataset, make_loader, stratified_split
from layerscale.data.transforms import RandomCropPad, train_augmentation


def _one_line(exc_info, *words):
    text = str(exc_info.value)
    assert "\n" not in text, text
    for word in words:
        assert word in text, text


# stratified_split ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [torch.tensor([0.0, 1.0, float("nan"), 1.0]), torch.tensor([0.0, 1.0, 0.0, 1.0]),
                                    torch.tensor([[0, 1], [1, 0]]), torch.tensor([True, False]), [0, 1, 0, 1]])
def test_stratified_split_needs_1d_integer_labels(labels):
    with pytest.raises(ValueError) as exc:
        stratified_split(labels, 0.5, 0)
    _one_line(exc, "labels must be a 1-D integer tensor")


@pytest.mark.parametrize("seed", [None, 1.5, "0", True, 2**64])
def test_stratified_split_refuses_a_bad_seed(seed):
    with pytest.raises(ValueError) as exc:
        stratified_split(torch.tensor([0, 1, 0, 1]), 0.5, seed)
    _one_line(exc, "seed must be an int")


def test_stratified_split_of_good_labels_keeps_every_example():
    labels = torch.tensor([0, 1, 2, 1, 0, 2, 2, 1], dtype=torch.uint8)
    train, test = stratified_split(labels, 0.5, 3)
    assert sorted(train.tolist() + test.tolist()) == list(range(8))


# TensorImageDataset / channel_stats ---------------------------------------------------------------------------------

IMAGES = torch.randint(0, 256, (4, 2, 3, 3), dtype=torch.uint8)
LABELS = torch.tensor([0, 1, 0, 1])


@pytest.mark.parametrize("kwargs,words", [({"std": [0.0, 1.0]}, ("std[0]", "> 0")),
                                          ({"std": [1.0, float("nan")]}, ("std[1]",)),
                                          ({"std": [1.0, -2.0]}, ("std[1]",)),
                                          ({"mean": [float("inf"), 0.0]}, ("mean[0]", "finite")),
                                          ({"pixel_max": 0}, ("pixel_max", "> 0")),
                                          ({"pixel_max": float("nan")}, ("pixel_max",)),
                                          ({"pixel_max": "255"}, ("pixel_max",)),
                                          ({"labels": torch.tensor([0.7, 1.0, 0.0, 1.0])}, ("labels", "integer")),
                                          ({"labels": torch.tensor([True, False, True, False])}, ("labels",))])
def test_tensor_dataset_refuses_values_that_make_nan_or_wrong_labels(kwargs, words):
    args = {"images": IMAGES, "labels": LABELS, "mean": [0.5, 0.5], "std": [0.25, 0.25]} | kwargs
    with pytest.raises(ValueError) as exc:
        TensorImageDataset(**args)
    _one_line(exc, *words)


@pytest.mark.parametrize("pixel_max", [0, -1.0, float("inf"), None])
def test_channel_stats_refuses_a_bad_pixel_max(pixel_max):
    with pytest.raises(ValueError) as exc:
        channel_stats(IMAGES, pixel_max)
    _one_line(exc, "pixel_max")


def test_channel_stats_refuses_images_without_pixels():
    with pytest.raises(ValueError) as exc:
        channel_stats(IMAGES[:0], 255)
    _one_line(exc, "no pixels")


def test_a_constant_channel_is_real_data_and_gets_std_one():
    images = IMAGES.clone()
    images[:, 1] = 0  # an all-black channel
    mean, std = channel_stats(images, 255)
    assert mean[1] == 0.0 and std[1] == 1.0 and std[0] > 0
    x, y = TensorImageDataset(images, LABELS.to(torch.uint8), mean, std)[0]
    assert torch.isfinite(x).all() and y.dtype == torch.int64


# load_dataset / transforms / make_loader ----------------------------------------------------------------------------

@pytest.mark.parametrize("call,words", [
    (lambda: load_dataset(None), ("dataset name must be a string",)),
    (lambda: load_dataset(3), ("dataset name",)),
    (lambda: load_dataset("mnist", img_size=8.5), ("img_size", "8.5")),
    (lambda: load_dataset("digits", img_size=True), ("img_size",)),
    (lambda: load_dataset("digits", augment=True, padding=-3), ("padding", "-3")),
    (lambda: load_dataset("digits", augment=True, padding=1.5), ("padding",)),
    (lambda: train_augmentation(-1, True), ("padding", "-1")),
    (lambda: train_augmentation(2.5, False), ("padding",)),
    (lambda: RandomCropPad(-1), ("padding",)),
])
def test_registry_and_transforms_refuse_bad_arguments(call, words):
    with pytest.raises(ValueError) as exc:
        call()
    _one_line(exc, *words)


DATASET = torch.utils.data.TensorDataset(torch.arange(8))


@pytest.mark.parametrize("kwargs,name", [({"batch_size": "4"}, "batch_size"), ({"batch_size": 4.5}, "batch_size"),
                                         ({"batch_size": 0}, "batch_size"), ({"batch_size": True}, "batch_size"),
                                         ({"num_workers": -1}, "num_workers"), ({"num_workers": 1.0}, "num_workers"),
                                         ({"seed": "x"}, "seed"), ({"seed": None}, "seed"), ({"seed": 2**64}, "seed")])
def test_make_loader_refuses_bad_arguments(kwargs, name):
    with pytest.raises(ValueError) as exc:
        make_loader(DATASET, **({"batch_size": 4} | kwargs), shuffle=True)
    _one_line(exc, name)


def test_good_arguments_still_work():
    assert [len(b[0]) for b in make_loader(DATASET, 3, shuffle=True, seed=5)] == [3, 3, 2]
    assert train_augmentation(0, False) is None and len(train_augmentation(2, True).transforms) == 2
    bundle = load_dataset("digits", augment=True, padding=2, img_size=8)
    x, y = bundle.train[0]
    assert x.shape == (1, 8, 8) and torch.isfinite(x).all()
