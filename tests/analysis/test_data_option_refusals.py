"""``--img-size``, ``--seq-len`` and ``--samples`` below their least value are refused by ``analyze`` and ``prune``
in one line naming the option, the value and the least value allowed, exit status 2, before any file is read or
written (:func:`layerscale.analysis.options.data_options.check_data_options`)."""

from __future__ import annotations

import pytest

from layerscale.cli import main

CASES = [
    (["--img-size", "-1"], "--img-size must be >= 1, got -1"),
    (["--img-size", "0"], "--img-size must be >= 1, got 0"),
    (["--seq-len", "0"], "--seq-len must be >= 2, got 0"),
    (["--seq-len", "1"], "--seq-len must be >= 2, got 1"),
    (["--samples", "0"], "--samples must be >= 1, got 0"),
    (["--samples", "-3"], "--samples must be >= 1, got -3"),
]


@pytest.mark.parametrize("command", ["analyze", "prune"])
@pytest.mark.parametrize("option,message", CASES)
def test_refused_in_one_line_before_the_source_is_read(tmp_path, capsys, command, option, message):
    # the source does not exist: a check after reading it would report that instead
    source, out = tmp_path / "no-such-source", tmp_path / "out"
    extra = ["--by", "gamma", "--remove", "1"] if command == "prune" else ["--no-progress"]
    capsys.readouterr()
    assert main([command, str(source), *option, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []
