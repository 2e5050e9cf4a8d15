"""A CIFAR batch file whose pickle asks numpy for a 745 GiB array (issue 30, item 6) is refused in one line before
anything is allocated — never a ``MemoryError``."""

import pickle

import numpy as np
import pytest

from layerscale.cli import main
from layerscale.data.safe_pickle import MAX_ARRAY_BYTES, safe_load_pickle


class _HugeArray:
    """Pickles as ``numpy.core.multiarray._reconstruct(ndarray, (260_000_000, 3072), 'B')``: a 117-byte file."""

    def __reduce__(self):
        reconstruct = np.ndarray.__reduce__(np.zeros(1))[0]
        return (reconstruct, (np.ndarray, (260_000_000, 3072), b"B"))


def _write_cifar10(folder, batch):
    folder.mkdir()
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}, protocol=4))
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(batch)


def test_huge_array_is_refused_before_allocation(tmp_path):
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": _HugeArray(), "labels": [0]}, protocol=4))
    assert path.stat().st_size < 200
    with pytest.raises(ValueError, match=r"data_batch_1: unreadable or unsafe pickle: an array of shape "
                                         r"\(260000000, 3072\) \(798,720,000,000 bytes\) is larger than any CIFAR "
                                         rf"batch \({MAX_ARRAY_BYTES:,} bytes at most\)"):
        safe_load_pickle(path)


def test_training_on_it_is_one_line_and_writes_nothing(tmp_path, capsys):
    _write_cifar10(tmp_path / "cifar-10-batches-py", pickle.dumps({"data": _HugeArray(), "labels": [0]}, protocol=4))
    config = tmp_path / "c.json"
    config.write_text('{"model": {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, "patch_size": 4}, '
                      f'"data": {{"name": "cifar10", "path": "{tmp_path}"}}}}')
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is larger than any CIFAR batch" in err, err
    assert not (tmp_path / "run").exists()
