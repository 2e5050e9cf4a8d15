"""A run's ``test_outcomes.json`` may come from someone else's study folder: nesting past Python's recursion, an
integer past its int-string limit, or a link is one ``ValueError`` naming the file, never a ``RecursionError``."""

import pytest
import torch

from layerscale.train.records.test_outcomes import OUTCOMES_FILE, read_test_outcomes, write_test_outcomes


@pytest.mark.parametrize("content, reason", [
    ("[" * 200_000 + "]" * 200_000, "nested too deep"),
    ('{"format": 1, "kind": "correct", "count": ' + "8" * 100_000 + ', "data": ""}', "an integer of more than"),
])
def test_crafted_outcomes_are_one_line_naming_the_file(tmp_path, content, reason):
    (tmp_path / OUTCOMES_FILE).write_text(content)
    with pytest.raises(ValueError) as info:
        read_test_outcomes(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / OUTCOMES_FILE}: ") and reason in str(info.value)
    assert "\n" not in str(info.value)


def test_a_link_is_refused_and_a_written_file_reads_back(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    write_test_outcomes(tmp_path / "elsewhere", "correct", torch.tensor([True, False, True]))
    assert read_test_outcomes(tmp_path / "elsewhere") == ("correct", [1.0, 0.0, 1.0])
    assert read_test_outcomes(tmp_path) is None
    (tmp_path / OUTCOMES_FILE).symlink_to(tmp_path / "elsewhere" / OUTCOMES_FILE)
    with pytest.raises(ValueError, match="refused \\(a symbolic link\\)"):
        read_test_outcomes(tmp_path)
