"""``read_metrics`` skips a last line cut short by a killed writer, and only that: a last line holding an integer
past Python's int-string limit is no cut line and is refused naming the file and the line."""

import pytest

from layerscale.train.records.metrics_log import read_metrics


def test_a_cut_last_line_is_skipped_a_huge_integer_is_refused(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2, "lo')
    assert read_metrics(path) == [{"step": 1}]
    path.write_text('{"step": 1}\n{"step": 2, "loss": ' + "3" * 100_000 + "}\n")
    with pytest.raises(ValueError, match=f"^{path}:2: refused \\(an integer of more than "):
        read_metrics(path)
