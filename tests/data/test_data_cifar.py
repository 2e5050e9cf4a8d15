import io
import os
import pickle

import numpy as np
import pytest
import torch

from data_writers import write_cifar10_dir, write_cifar100_dir
from layerscale.data import RestrictedUnpickler, load_dataset, safe_load_pickle


@pytest.mark.parametrize("use_parent", [True, False])
def test_cifar10_loads_from_folder_or_parent(tmp_path, use_parent):
    folder = write_cifar10_dir(tmp_path)
    bundle = load_dataset("cifar10", tmp_path if use_parent else folder)
    assert (len(bundle.train), len(bundle.test)) == (20, 3)
    assert (bundle.num_classes, bundle.in_chans, bundle.img_size) == (10, 3, 32)
    assert bundle.class_names[:2] == ["airplane", "automobile"]
    x, y = bundle.train[5]  # second image of data_batch_2: batches are concatenated in order
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    with (folder / "data_batch_2").open("rb") as f:
        batch = pickle.load(f)  # our own trusted test file
    assert int(y) == batch["labels"][1]
    # Rows are channel-major (1024 red, 1024 green, 1024 blue), as in the real files.
    mean, std = torch.tensor(bundle.mean).view(3, 1, 1), torch.tensor(bundle.std).view(3, 1, 1)
    expected = torch.from_numpy(batch["data"][1].reshape(3, 32, 32)).float() / 255
    torch.testing.assert_close(x * std + mean, expected, atol=1e-5, rtol=0)


def test_cifar100_uses_fine_labels(tmp_path):
    folder = write_cifar100_dir(tmp_path)
    bundle = load_dataset("cifar100", tmp_path)
    assert (len(bundle.train), len(bundle.test), bundle.num_classes) == (8, 4, 100)
    with (folder / "test").open("rb") as f:
        assert bundle.test.labels.tolist() == pickle.load(f)["fine_labels"]
    assert bundle.class_names[99] == "class99"


def test_missing_batch_names_file(tmp_path):
    folder = write_cifar10_dir(tmp_path)
    (folder / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        load_dataset("cifar10", folder)


def test_label_count_mismatch_names_file(tmp_path):
    folder = write_cifar10_dir(tmp_path)
    with (folder / "test_batch").open("wb") as f:
        pickle.dump({"data": np.zeros((3, 3072), np.uint8), "labels": [0, 1]}, f)
    with pytest.raises(ValueError, match="test_batch: 'labels' has 2 entries, expected 3"):
        load_dataset("cifar10", folder)


def test_wrong_image_shape_names_file(tmp_path):
    folder = write_cifar10_dir(tmp_path)
    with (folder / "data_batch_1").open("wb") as f:
        pickle.dump({"data": np.zeros((4, 784), np.uint8), "labels": [0] * 4}, f)
    with pytest.raises(ValueError, match=r"data_batch_1: 'data' must be a uint8 array of shape \(N, 3072\)"):
        load_dataset("cifar10", folder)


def test_truncated_pickle_names_file(tmp_path):
    folder = write_cifar10_dir(tmp_path)
    path = folder / "data_batch_4"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="data_batch_4: unreadable or unsafe pickle"):
        load_dataset("cifar10", folder)


class _Exploit:
    """Unpickling this calls os.mkdir(target): a stand-in for any command an attacker would run."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def test_forbidden_global_is_refused_before_it_runs(tmp_path):
    folder = write_cifar10_dir(tmp_path)
    sentinel = tmp_path / "pwned"
    payload = pickle.dumps({"data": np.zeros((4, 3072), np.uint8), "labels": [0] * 4, "x": _Exploit(str(sentinel))})
    # The payload is live: a plain pickle.loads would run it.
    pickle.loads(payload)
    assert sentinel.is_dir()
    sentinel.rmdir()
    (folder / "data_batch_1").write_bytes(payload)
    with pytest.raises(ValueError, match=r"data_batch_1: .*refusing to load global (posix|os|nt)\.mkdir"):
        load_dataset("cifar10", folder)
    assert not sentinel.exists()


@pytest.mark.parametrize("module, name", [("builtins", "eval"), ("numpy", "load"), ("numpy", "frombuffer"),
                                          ("os", "system"), ("numpy.core.multiarray", "scalar")])  # fmt: skip
def test_restricted_unpickler_allows_only_array_reconstruction(module, name):
    with pytest.raises(pickle.UnpicklingError, match=f"{module}.{name}"):
        RestrictedUnpickler(io.BytesIO(b"")).find_class(module, name)


@pytest.mark.parametrize("protocol", [2, 4])
def test_numpy_arrays_round_trip(tmp_path, protocol):
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    path = tmp_path / "arr.pkl"
    # protocol 2 of Python 3 pickles bytes via _codecs.encode, which is refused; use a str-free dict.
    path.write_bytes(pickle.dumps({"a": array, "b": [1, 2]}, protocol=protocol))
    if protocol == 2:
        with pytest.raises(ValueError, match="_codecs.encode"):
            safe_load_pickle(path)
    else:
        loaded = safe_load_pickle(path)
        assert loaded["b"] == [1, 2] and np.array_equal(loaded["a"], array)


def test_python2_style_pickle_loads(tmp_path):
    # Hand-written protocol-2 stream as Python 2's numpy wrote it (the real CIFAR files): globals via
    # numpy.core.multiarray, raw data as a py2 str (SHORT_BINSTRING), decoded with latin1.
    raw = bytes(range(6))
    stream = (
        b"\x80\x02}q\x00U\x04dataq\x01"
        b"cnumpy.core.multiarray\n_reconstruct\nq\x02cnumpy\nndarray\nq\x03K\x00\x85U\x01b\x87R"
        b"(K\x01K\x02K\x03\x86cnumpy\ndtype\nU\x02u1K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xff"
        b"J\xff\xff\xff\xffK\x00tb\x89U\x06" + raw + b"tbs."
    )
    path = tmp_path / "py2"
    path.write_bytes(stream)
    loaded = safe_load_pickle(path)
    assert loaded["data"].dtype == np.uint8 and loaded["data"].tolist() == [[0, 1, 2], [3, 4, 5]]
