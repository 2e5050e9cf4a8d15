import sys

import pytest
import torch

from layerscale.data import load_dataset

Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")

COLOURS = {"blue": (0, 0, 255), "green": (0, 255, 0), "red": (255, 0, 0)}


def _write_class_images(root, per_class=5, size=(14, 10)):
    for name, rgb in COLOURS.items():
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            suffix = ".png" if i % 2 else ".jpg"  # both formats, and lossless PNG for exact checks
            Image.new("RGB", size, rgb).save(root / name / f"{i}{suffix}")


def _pixels(bundle, x):
    mean, std = torch.tensor(bundle.mean).view(-1, 1, 1), torch.tensor(bundle.std).view(-1, 1, 1)
    return x * std + mean


def test_flat_folder_is_split_stratified_and_resized(tmp_path):
    _write_class_images(tmp_path)
    bundle = load_dataset("imagefolder", tmp_path, img_size=16)
    assert bundle.class_names == ["blue", "green", "red"]
    assert (bundle.num_classes, bundle.in_chans, bundle.img_size) == (3, 3, 16)
    assert (len(bundle.train), len(bundle.test)) == (12, 3)
    assert sorted(bundle.test.labels.tolist()) == [0, 1, 2]  # one of five per class at test_fraction=0.2
    for i in range(len(bundle.train)):
        x, y = bundle.train[i]
        assert x.shape == (3, 16, 16)
        # Each image is one flat colour; the class index says which channel is lit.
        means = _pixels(bundle, x).mean(dim=(1, 2))
        expected = torch.tensor(COLOURS[bundle.class_names[int(y)]], dtype=torch.float32) / 255
        torch.testing.assert_close(means, expected, atol=0.02, rtol=0)


def test_train_val_layout(tmp_path):
    _write_class_images(tmp_path / "train", per_class=2)
    (tmp_path / "val" / "red").mkdir(parents=True)
    Image.new("RGB", (8, 8), COLOURS["red"]).save(tmp_path / "val" / "red" / "a.png")
    bundle = load_dataset("imagefolder", tmp_path, img_size=8)
    assert (len(bundle.train), len(bundle.test)) == (6, 1)
    assert bundle.test.labels.tolist() == [bundle.class_names.index("red")]


def _one_image(path, colour):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), COLOURS[colour]).save(path)


def test_train_val_test_layout_makes_val_the_validation_split(tmp_path):
    """``val/`` beside ``test/`` was passed over without a word (audit 2026-12-07, section 10): as in torchvision's
    and timm's folder datasets, it is the validation split, and ``test/`` the test split."""
    _write_class_images(tmp_path / "train", per_class=2)
    _one_image(tmp_path / "val" / "blue" / "a.png", "blue")
    _one_image(tmp_path / "val" / "red" / "b.png", "red")
    _one_image(tmp_path / "test" / "green" / "c.png", "green")
    bundle = load_dataset("imagefolder", tmp_path, img_size=8)
    names = bundle.class_names
    assert (len(bundle.train), len(bundle.validation), len(bundle.test)) == (6, 2, 1)
    assert bundle.validation.labels.tolist() == [names.index("blue"), names.index("red")]
    assert bundle.test.labels.tolist() == [names.index("green")]
    assert torch.equal(bundle.validation.mean, bundle.train.mean)  # normalised with the training images' statistics
    assert bundle.validation.transform is None


def test_train_val_test_layout_with_a_validation_fraction_is_refused_before_any_image_is_read(tmp_path):
    _write_class_images(tmp_path / "train", per_class=2)
    _one_image(tmp_path / "val" / "red" / "a.png", "red")
    _one_image(tmp_path / "test" / "red" / "b.png", "red")
    (tmp_path / "train" / "red" / "broken.png").write_bytes(b"not a png")  # reading it would be another error
    with pytest.raises(ValueError, match=r"has train/, val/ and test/, and val/ is the validation split; "
                                         r"validation_fraction 0.1 would carve a second one from train/") as info:
        load_dataset("imagefolder", tmp_path, img_size=8, validation_fraction=0.1)
    assert "\n" not in str(info.value)


def test_an_unknown_validation_class_is_an_error(tmp_path):
    _write_class_images(tmp_path / "train", per_class=1)
    _one_image(tmp_path / "test" / "red" / "a.png", "red")
    _one_image(tmp_path / "val" / "purple" / "b.png", "red")
    with pytest.raises(ValueError, match=r"val: classes \['purple'\] are not in"):
        load_dataset("imagefolder", tmp_path, img_size=8)


def test_unknown_test_class_is_an_error(tmp_path):
    _write_class_images(tmp_path / "train", per_class=1)
    (tmp_path / "test" / "purple").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"\['purple'\] are not in"):
        load_dataset("imagefolder", tmp_path, img_size=8)


def test_unreadable_image_names_file(tmp_path):
    _write_class_images(tmp_path, per_class=1)
    (tmp_path / "red" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match="broken.png: not a readable image"):
        load_dataset("imagefolder", tmp_path, img_size=8)


def test_empty_folder(tmp_path):
    (tmp_path / "cats").mkdir()
    with pytest.raises(ValueError, match="cats: a class folder with no .* image; every sub-folder is a class"):
        load_dataset("imagefolder", tmp_path, img_size=8)


def test_a_class_folder_without_images_is_refused_not_made_an_extra_class(tmp_path):
    """It became a class no example has (4 outputs for 3 classes, chance at ln 4), without a word."""
    _write_class_images(tmp_path, per_class=2)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("about the data")
    with pytest.raises(ValueError, match="notes: a class folder with no .* image") as refused:
        load_dataset("imagefolder", tmp_path, img_size=8)
    assert "\n" not in str(refused.value)


def test_hidden_entries_inside_class_folders_are_passed_over(tmp_path):
    """A Jupyter checkpoint copy of every image inside its class folder doubled the data, and 8 of 12 test images
    were copies of training images (audit 2026-12-07)."""
    _write_class_images(tmp_path, per_class=5)
    for name in COLOURS:
        hidden = tmp_path / name / ".ipynb_checkpoints"
        hidden.mkdir()
        for image in (tmp_path / name).glob("*.png"):
            (hidden / image.name).write_bytes(image.read_bytes())
        (tmp_path / name / "._0.png").write_bytes(b"AppleDouble metadata, not an image")
    bundle = load_dataset("imagefolder", tmp_path, img_size=8)
    assert (len(bundle.train), len(bundle.test)) == (12, 3)


@pytest.mark.parametrize("link", ["image", "class folder"])
def test_a_symbolic_link_inside_the_folder_is_refused_by_name(tmp_path, link):
    root, outside = tmp_path / "data", tmp_path / "outside"
    _write_class_images(root, per_class=2)
    _write_class_images(outside, per_class=2)
    if link == "image":
        (root / "red" / "linked.png").symlink_to(outside / "red" / "1.png")
        expected = r"red/linked\.png: is a symbolic link inside the image folder"
    else:
        (root / "yellow").symlink_to(outside / "red", target_is_directory=True)
        expected = r"yellow: is a symbolic link inside the image folder .*; expected one sub-folder per class"
    with pytest.raises(ValueError, match=expected):
        load_dataset("imagefolder", root, img_size=8)


def test_the_folder_given_may_itself_be_a_link(tmp_path):
    _write_class_images(tmp_path / "data", per_class=5)
    (tmp_path / "latest").symlink_to(tmp_path / "data", target_is_directory=True)
    bundle = load_dataset("imagefolder", tmp_path / "latest", img_size=8)
    assert (len(bundle.train), len(bundle.test)) == (12, 3)


def test_missing_pillow_gives_clear_import_error(tmp_path, monkeypatch):
    _write_class_images(tmp_path, per_class=1)
    monkeypatch.setitem(sys.modules, "PIL", None)  # makes `from PIL import ...` raise ImportError
    with pytest.raises(ImportError, match="pip install pillow"):
        load_dataset("imagefolder", tmp_path, img_size=8)
