import pytest
import torch

from layerscale.data import BYTE_VOCAB_SIZE, ByteWindowDataset, load_text, read_text_bytes


def test_file_windows_shift_by_one_and_split_by_position(tmp_path):
    data = bytes(range(256)) * 4  # 1024 bytes, every value, position recoverable from content
    path = tmp_path / "corpus.bin"
    path.write_bytes(data)
    bundle = load_text(path, block_size=16, val_fraction=0.25)
    assert bundle.vocab_size == BYTE_VOCAB_SIZE == 256
    assert (bundle.num_train_tokens, bundle.num_val_tokens) == (768, 256)
    assert len(bundle.train) == (768 - 1) // 16 and len(bundle.val) == (256 - 1) // 16
    x, y = bundle.train[2]
    assert x.dtype == torch.int64 and x.shape == (16,) and y.shape == (16,)
    assert x.tolist() == list(data[32:48]) and y.tolist() == list(data[33:49])
    vx, _ = bundle.val[0]
    assert vx.tolist() == list(data[768:784])  # validation is the last quarter
    # Training windows are cut from the first 768 bytes only, so none reaches into validation.
    assert bundle.train.tokens.tolist() == list(data[:768])


def test_folder_is_sorted_recursive_joined_with_newline_and_skips_hidden(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_bytes(b"second")
    (tmp_path / "a.txt").write_bytes(b"first")
    (tmp_path / "c.txt").write_bytes(b"third")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_bytes(b"hidden")
    assert read_text_bytes(tmp_path) == b"first\nsecond\nthird"
    bundle = load_text(tmp_path, block_size=4, val_fraction=0.0)
    assert bundle.val is None and bundle.num_train_tokens == 18
    assert bytes(bundle.train[0][0].tolist()) == b"firs"


def test_too_short_names_path_and_sizes(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_bytes(b"x" * 40)
    with pytest.raises(ValueError, match=r"tiny.txt: 40 bytes of text give 36 train / 4 val bytes.*block_size \+ 1 = 9"):
        load_text(path, block_size=8)


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path.name}: 0 bytes"):
        load_text(tmp_path, block_size=4)


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        load_text(tmp_path / "nope", block_size=4)


def test_window_dataset_bounds():
    ds = ByteWindowDataset(torch.arange(10, dtype=torch.uint8), block_size=3)
    assert len(ds) == 3
    assert ds[-1][0].tolist() == [6, 7, 8] and ds[-1][1].tolist() == [7, 8, 9]
    with pytest.raises(IndexError):
        ds[3]


def test_a_glob_pattern_reads_the_matching_files_in_sorted_order(tmp_path, monkeypatch):
    from layerscale.data.text import read_text_bytes

    (tmp_path / "b.txt").write_bytes(b"bee")
    (tmp_path / "a.txt").write_bytes(b"ay")
    (tmp_path / "tags").write_bytes(b"\x00binary index")  # not matched: left out
    assert read_text_bytes(tmp_path / "*.txt") == b"ay\nbee"
    monkeypatch.chdir(tmp_path)
    assert read_text_bytes("*.txt") == b"ay\nbee"
    with pytest.raises(FileNotFoundError, match="no text file matches"):
        read_text_bytes(tmp_path / "*.md")
