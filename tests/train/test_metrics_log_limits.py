"""``read_metrics`` reads a ``metrics.jsonl`` that may come from a study folder someone else made: a regular file of
bounded size, never a link (followed, it would read whatever file the link names) nor a FIFO (opening would block)."""

import os

import pytest

from layerscale.train.records import metrics_log
from layerscale.train.records.metrics_log import read_metrics


def test_a_missing_log_has_no_records(tmp_path):
    assert read_metrics(tmp_path / "metrics.jsonl") == []


def test_a_link_is_refused_not_followed(tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"step": 1, "split": "test", "accuracy": 0.99}\n')
    (tmp_path / "run").mkdir()
    os.symlink(outside, tmp_path / "run" / "metrics.jsonl")
    with pytest.raises(ValueError, match=r"metrics\.jsonl: refused \(a symbolic link\)"):
        read_metrics(tmp_path / "run" / "metrics.jsonl")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "metrics.jsonl")
    with pytest.raises(ValueError, match="expected a regular file"):
        read_metrics(tmp_path / "metrics.jsonl")


def test_a_log_over_the_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics_log, "MAX_METRICS_BYTES", 64)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n' * 10)
    with pytest.raises(ValueError, match=r"refused \(120 bytes\); expected at most 64 bytes"):
        read_metrics(tmp_path / "metrics.jsonl")


def test_bytes_that_are_not_utf8_are_named_with_the_file(tmp_path):
    (tmp_path / "metrics.jsonl").write_bytes(b'{"step": 1}\n\xff\xfe\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl: not UTF-8 text"):
        read_metrics(tmp_path / "metrics.jsonl")
