import gzip

import numpy as np
import pytest
import torch

from data_writers import write_idx, write_mnist_dir
from layerscale.data import FASHION_MNIST_DEBIAN_DIR, load_dataset, read_idx
from layerscale.data import idx as idx_module


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_loads_shapes_labels_and_pixels(tmp_path, gz):
    arrays = write_mnist_dir(tmp_path, gz=gz)
    bundle = load_dataset("mnist", tmp_path)
    assert (bundle.num_classes, bundle.in_chans, bundle.img_size) == (10, 1, 28)
    assert (len(bundle.train), len(bundle.test)) == (12, 6)
    x, y = bundle.train[3]
    assert x.dtype == torch.float32 and x.shape == (1, 28, 28)
    assert y.dtype == torch.int64 and int(y) == int(arrays["train"][1][3])
    # Undoing the normalisation gives back the bytes written, in the same layout.
    pixels = x * bundle.std[0] + bundle.mean[0]
    torch.testing.assert_close(pixels[0], torch.from_numpy(arrays["train"][0][3]).float() / 255, atol=1e-5, rtol=0)
    assert bundle.test.labels.tolist() == arrays["t10k"][1].tolist()


def test_normalisation_uses_training_statistics(tmp_path):
    arrays = write_mnist_dir(tmp_path)
    bundle = load_dataset("mnist", tmp_path)
    train = torch.stack([bundle.train[i][0] for i in range(len(bundle.train))])
    assert abs(train.mean().item()) < 1e-5
    assert abs(train.std(unbiased=False).item() - 1) < 1e-4
    assert bundle.mean[0] == pytest.approx(arrays["train"][0].mean() / 255, rel=1e-9)


def test_read_idx_matches_numpy_for_gz_and_raw(tmp_path):
    data = np.arange(2 * 3 * 5, dtype=np.uint8).reshape(2, 3, 5)
    raw, gz = write_idx(tmp_path / "a", data), write_idx(tmp_path / "b", data, gz=True)
    for path in (raw, gz):
        assert read_idx(path, 3).tolist() == data.tolist()


def test_bad_magic_names_file(tmp_path):
    path = tmp_path / "foreign"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(ValueError, match="foreign.*magic number 89504e47, expected 00000803"):
        read_idx(path, 3)


def test_wrong_dimension_count_is_rejected(tmp_path):
    path = write_idx(tmp_path / "labels", np.zeros(5, np.uint8))
    with pytest.raises(ValueError, match="expected 00000803"):
        read_idx(path, 3)


@pytest.mark.parametrize("delta, problem", [(-7, "truncated"), (3, "trailing data")])
def test_wrong_payload_size_names_file(tmp_path, delta, problem):
    path = write_idx(tmp_path / "imgs", np.zeros((4, 5, 5), np.uint8))
    raw = path.read_bytes()
    path.write_bytes(raw[:delta] if delta < 0 else raw + bytes(delta))
    with pytest.raises(ValueError, match=rf"imgs: {problem}.*\(4, 5, 5\) needs {16 + 100}"):
        read_idx(path, 3)


def test_truncated_gzip_names_file(tmp_path):
    path = write_idx(tmp_path / "imgs", np.zeros((40, 28, 28), np.uint8), gz=True)
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(ValueError, match="imgs.gz: corrupt or truncated gzip"):
        read_idx(path, 3)


def test_label_count_mismatch(tmp_path):
    write_mnist_dir(tmp_path)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(11, np.uint8))
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte: 11 labels, expected 12"):
        load_dataset("mnist", tmp_path)


def test_label_out_of_range(tmp_path):
    write_mnist_dir(tmp_path)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.full(6, 10, np.uint8))
    with pytest.raises(ValueError, match="label 10 found"):
        load_dataset("mnist", tmp_path)


def test_train_and_test_sizes_must_agree(tmp_path):
    write_mnist_dir(tmp_path)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((6, 20, 20), np.uint8))
    with pytest.raises(ValueError, match=r"train images are \(28, 28\) but test images \(20, 20\)"):
        load_dataset("mnist", tmp_path)


def test_missing_file_names_it(tmp_path):
    write_mnist_dir(tmp_path)
    (tmp_path / "t10k-images-idx3-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        load_dataset("mnist", tmp_path)


def test_mnist_without_data_dir_asks_for_it():
    with pytest.raises(ValueError, match="set data.path to a folder"):
        load_dataset("mnist")


def test_fashion_default_dir_missing_names_dir_package_and_option(tmp_path, monkeypatch):
    missing = tmp_path / "not-installed"
    monkeypatch.setattr(idx_module, "FASHION_MNIST_DEBIAN_DIR", missing)
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("fashion-mnist")
    message = str(info.value)
    assert str(missing) in message and "dataset-fashion-mnist" in message and "data.path" in message
    assert "\n" not in message


def test_fashion_class_names(tmp_path):
    write_mnist_dir(tmp_path, gz=True)
    bundle = load_dataset("fashion-mnist", tmp_path)
    assert bundle.class_names[0] == "T-shirt/top" and bundle.class_names[9] == "Ankle boot"


@pytest.mark.skipif(
    not (FASHION_MNIST_DEBIAN_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason=f"Debian package dataset-fashion-mnist not installed ({FASHION_MNIST_DEBIAN_DIR})",
)
def test_debian_fashion_mnist_package():
    bundle = load_dataset("fashion-mnist")
    assert (len(bundle.train), len(bundle.test)) == (60000, 10000)
    assert (bundle.img_size, bundle.in_chans, bundle.num_classes) == (28, 1, 10)
    assert torch.bincount(bundle.train.labels).tolist() == [6000] * 10
    # The published Fashion-MNIST statistics, as a check that the bytes were decoded right.
    assert bundle.mean[0] == pytest.approx(0.2860, abs=1e-4)
    assert bundle.std[0] == pytest.approx(0.3530, abs=1e-4)


def test_gzip_detected_by_content_not_name(tmp_path):
    data = np.arange(6, dtype=np.uint8)
    path = write_idx(tmp_path / "labels", data, gz=True)
    renamed = tmp_path / "labels-no-suffix"
    renamed.write_bytes(path.read_bytes())
    assert gzip.decompress(renamed.read_bytes())  # really compressed
    assert read_idx(renamed, 1).tolist() == data.tolist()
