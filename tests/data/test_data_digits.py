import sys

import pytest
import torch

from layerscale.data import load_dataset
from layerscale.data.registry import renormalized

pytest.importorskip("sklearn", reason="scikit-learn (the [data] extra) is not installed")


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def test_shape_classes_and_split_sizes(digits):
    assert (digits.num_classes, digits.in_chans, digits.img_size) == (10, 1, 8)
    assert digits.class_names == [str(i) for i in range(10)]
    assert len(digits.train) + len(digits.test) == 1797
    assert (len(digits.train), len(digits.test)) == (1438, 359)
    x, y = digits.train[0]
    assert x.shape == (1, 8, 8) and x.dtype == torch.float32 and y.dtype == torch.int64


def test_split_is_stratified(digits):
    train = torch.bincount(digits.train.labels, minlength=10)
    test = torch.bincount(digits.test.labels, minlength=10)
    fractions = test.double() / (train + test).double()
    assert ((fractions - 0.2).abs() < 0.01).all()


def test_split_is_deterministic_and_depends_on_seed(digits):
    again = load_dataset("digits")
    assert torch.equal(again.train.images, digits.train.images)
    assert torch.equal(again.test.labels, digits.test.labels)
    other = load_dataset("digits", seed=1)
    assert not torch.equal(other.train.images, digits.train.images)


def test_pixels_scale_from_0_16_to_unit_interval(digits):
    pixels = digits.train.images.float() / digits.train.pixel_max
    assert pixels.min() == 0 and pixels.max() == 1  # load_digits has pixels at 0 and at 16
    train = torch.stack([digits.train[i][0] for i in range(len(digits.train))])
    assert abs(train.mean().item()) < 1e-5 and abs(train.std(unbiased=False).item() - 1) < 1e-4


def test_a_given_normalization_replaces_the_training_splits_statistics(digits):
    given = renormalized(digits, ([0.5], [0.25]))
    assert (given.mean, given.std) == ((0.5,), (0.25,))
    pixels = digits.test.images[:5].float() / digits.test.pixel_max
    x = torch.stack([given.test[i][0] for i in range(5)])
    torch.testing.assert_close(x, (pixels - 0.5) / 0.25)


@pytest.mark.parametrize("normalization, message", [
    (([0.5, 0.5], [0.25, 0.25]), "mean must be 1 number"), (([0.5], [0.0]), r"std\[0\] must be a finite number > 0"),
    (([float("nan")], [0.2]), r"mean\[0\] must be a finite number"), (([0.5],), "must be \\(mean, std\\)"),
    ((["0.5"], [0.2]), "mean must be 1 number")])
def test_a_bad_normalization_is_refused_in_one_line(digits, normalization, message):
    with pytest.raises(ValueError, match=message):
        renormalized(digits, normalization)


def test_missing_sklearn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'torch-layerscale\[data\]'"):
        load_dataset("digits")
