"""FIFOs, folders and links where the data readers expect a file are named as what they are, never opened; a text
corpus folder someone else made gives its own regular files only, within this machine's memory."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from data_writers import write_idx, write_mnist_dir

from layerscale.data import load_text, read_idx, read_text_bytes
from layerscale.data.idx import read_mnist_like
from layerscale.data.safe_pickle import safe_load_pickle


def _refused_quickly(call, fifo=None, timeout=20):
    """The exception ``call()`` raises, failing the test (not hanging it) when it blocks on ``fifo``."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        if fifo is not None:  # unblock the reader stuck in open()
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout)
        pytest.fail(f"blocked on {fifo}")
    if "error" not in outcome:
        pytest.fail(f"accepted: {outcome.get('value')!r:.80}")
    return outcome["error"]


def _assert_refused(error, *words):
    assert isinstance(error, ValueError), repr(error)
    assert "\n" not in str(error)
    for word in words:
        assert word in str(error), str(error)


def test_read_idx_names_a_fifo_and_a_folder(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    _assert_refused(_refused_quickly(lambda: read_idx(fifo, 3), fifo), "is a FIFO", "IDX")
    (tmp_path / "d").mkdir()
    _assert_refused(_refused_quickly(lambda: read_idx(tmp_path / "d", 3)), "is a directory")
    good = write_idx(tmp_path / "good", np.zeros((2, 3, 3), dtype=np.uint8))
    assert tuple(read_idx(good, 3).shape) == (2, 3, 3)


def test_the_mnist_finder_names_a_fifo(tmp_path):
    write_mnist_dir(tmp_path, n_train=4, n_test=2, size=4)
    fifo = tmp_path / "t10k-labels-idx1-ubyte"
    fifo.unlink()
    os.mkfifo(fifo)
    _assert_refused(_refused_quickly(lambda: read_mnist_like("mnist", tmp_path), fifo), "t10k-labels-idx1-ubyte",
                    "is a FIFO")


def test_safe_load_pickle_names_a_fifo_and_a_folder(tmp_path):
    fifo = tmp_path / "data_batch_1"
    os.mkfifo(fifo)
    _assert_refused(_refused_quickly(lambda: safe_load_pickle(fifo), fifo), "is a FIFO", "pickle")
    _assert_refused(_refused_quickly(lambda: safe_load_pickle(tmp_path)), "is a directory")
    with pytest.raises(FileNotFoundError):
        safe_load_pickle(tmp_path / "missing")


@pytest.fixture()
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    (folder / "a.txt").write_bytes(b"alpha " * 4)
    (folder / "sub" / "b.txt").write_bytes(b"beta " * 4)
    (folder / ".hidden" / "c.txt").write_bytes(b"hidden")
    return folder


def test_a_link_inside_a_corpus_folder_is_refused_naming_it(tmp_path, corpus):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"the secret " * 10)
    (corpus / "sub" / "link.txt").symlink_to(secret)
    for call in (lambda: read_text_bytes(corpus), lambda: load_text(corpus, 8)):
        error = _refused_quickly(call)
        _assert_refused(error, "link.txt", "symbolic link")
        assert "secret" not in str(error).replace("secret.txt", "")


def test_a_fifo_inside_a_corpus_folder_or_named_is_refused(tmp_path, corpus):
    os.mkfifo(corpus / "pipe.txt")
    _assert_refused(_refused_quickly(lambda: read_text_bytes(corpus), corpus / "pipe.txt"), "pipe.txt", "FIFO")
    fifo = tmp_path / "named.txt"
    os.mkfifo(fifo)
    _assert_refused(_refused_quickly(lambda: read_text_bytes(fifo), fifo), "named.txt", "is a FIFO")


def test_a_corpus_larger_than_memory_is_refused_before_reading(corpus, monkeypatch):
    monkeypatch.setattr("layerscale.data.text.machine_memory_bytes", lambda: 30)
    _assert_refused(_refused_quickly(lambda: read_text_bytes(corpus)), "44 bytes", "memory")
    monkeypatch.setattr("layerscale.data.text.machine_memory_bytes", lambda: 44)
    assert len(read_text_bytes(corpus)) == 24 + 1 + 20


def test_good_corpora_read_as_before(tmp_path, corpus):
    assert read_text_bytes(corpus) == b"alpha " * 4 + b"\n" + b"beta " * 4  # hidden folder skipped, sorted paths
    (tmp_path / "via_link").symlink_to(corpus, target_is_directory=True)  # the folder the user names may be a link
    assert read_text_bytes(tmp_path / "via_link") == read_text_bytes(corpus)
    assert read_text_bytes(corpus / "a.txt") == b"alpha " * 4
    assert read_text_bytes(corpus / "*.txt") == b"alpha " * 4
    assert load_text(corpus, 8, 0.0).num_train_tokens == 45
