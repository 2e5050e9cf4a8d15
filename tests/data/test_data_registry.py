import pytest
import torch

from data_writers import write_cifar10_dir, write_mnist_dir
from layerscale.data import DATASET_NAMES, RandomCropPad, RandomHorizontalFlip, load_dataset


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError) as info:
        load_dataset("imagenet")
    message = str(info.value)
    assert "'imagenet'" in message
    for name in ("digits", "mnist", "fashion-mnist", "cifar10", "cifar100", "imagefolder"):
        assert name in message and name in DATASET_NAMES


@pytest.mark.parametrize("alias", ["MNIST", "mnist ", "Mnist"])
def test_names_are_case_and_space_insensitive(tmp_path, alias):
    write_mnist_dir(tmp_path)
    assert load_dataset(alias, tmp_path).name == "mnist"


def test_augmentation_only_on_train_with_dataset_defaults(tmp_path):
    write_mnist_dir(tmp_path / "m")
    write_cifar10_dir(tmp_path / "c")
    mnist = load_dataset("mnist", tmp_path / "m", augment=True)
    cifar = load_dataset("cifar10", tmp_path / "c", augment=True)
    assert mnist.test.transform is None and cifar.test.transform is None
    kinds = lambda b: [(type(t), getattr(t, "padding", None)) for t in b.train.transform.transforms]  # noqa: E731
    assert kinds(mnist) == [(RandomCropPad, 2)]  # no flip: a mirrored digit is another symbol
    assert kinds(cifar) == [(RandomCropPad, 4), (RandomHorizontalFlip, None)]
    assert load_dataset("mnist", tmp_path / "m").train.transform is None
    flipped = load_dataset("mnist", tmp_path / "m", augment=True, hflip=True, padding=0)
    assert kinds(flipped) == [(RandomHorizontalFlip, None)]


def test_img_size_resizes_and_scales_padding(tmp_path):
    write_mnist_dir(tmp_path)
    bundle = load_dataset("mnist", tmp_path, img_size=56, augment=True)
    assert bundle.img_size == 56 and bundle.train[0][0].shape == (1, 56, 56)
    assert bundle.test[0][0].shape == (1, 56, 56)
    assert bundle.train.transform.transforms[0].padding == 4


def test_resize_of_a_constant_image_keeps_its_value(tmp_path):
    import numpy as np

    from data_writers import write_idx

    write_mnist_dir(tmp_path)
    write_idx(tmp_path / "train-images-idx3-ubyte", np.full((12, 28, 28), 200, np.uint8))
    bundle = load_dataset("mnist", tmp_path, img_size=14)
    assert bundle.train.images.unique().tolist() == [200]


def test_augmented_item_is_reproducible_under_global_seed(tmp_path):
    write_cifar10_dir(tmp_path)
    bundle = load_dataset("cifar10", tmp_path, augment=True)
    torch.manual_seed(3)
    first = [bundle.train[i][0] for i in range(6)]
    torch.manual_seed(3)
    second = [bundle.train[i][0] for i in range(6)]
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    plain = load_dataset("cifar10", tmp_path)
    assert any(not torch.equal(a, plain.train[i][0]) for i, a in enumerate(first))


def test_a_data_path_for_the_embedded_digits_is_refused_not_ignored(tmp_path):
    write_mnist_dir(tmp_path)  # the user meant the files there, not scikit-learn's digits
    with pytest.raises(ValueError, match=r"dataset 'digits' is embedded .* got the data path '.*': leave the path out"):
        load_dataset("digits", tmp_path)
    assert load_dataset("digits").name == "digits"


def test_analyze_of_a_digits_run_with_data_path_but_no_data_says_so(train_with_cli, tmp_path, capsys):
    """``analyze RUN --data-path DIR`` without ``--data`` reads the run's own dataset from DIR; for digits, which
    has no files, the path was silently dropped and the run's own split used."""
    from layerscale.cli import main

    run = train_with_cli({"model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "depth": 1},
                          "data": {"name": "digits", "batch_size": 64, "augment": False},
                          "optim": {"epochs": 1, "max_steps": 2}}, "digits-data-path")
    write_mnist_dir(tmp_path / "mnist")
    assert main(["analyze", str(run), "--data-path", str(tmp_path / "mnist"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dataset 'digits' is embedded" in err
    assert not (tmp_path / "r").exists()
