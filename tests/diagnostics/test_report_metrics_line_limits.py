"""A ``metrics.jsonl`` line Python's JSON reader cannot hold (200,000 levels deep, a 100,000-digit integer) is no
damage a killed writer leaves: ``layerscale report`` refuses it in one line naming the file and the line, status 2,
instead of a ``RecursionError`` traceback or an int-limit message naming nothing. A line that is not JSON is still
skipped and noted, as before."""

import json

import pytest

from layerscale.cli import main
from layerscale.diagnostics.run_data import read_run

GOOD = json.dumps({"step": 1, "split": "train", "loss": 1.0})


def _run(tmp_path, lines):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(json.dumps({"model": {"name": "vit", "depth": 2}}))
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    return run


@pytest.mark.parametrize("bad, reason", [
    ("[" * 200_000 + "]" * 200_000, r"refused \(nested too deep\); expected at most 32 levels"),
    ('{"step": 2, "split": "train", "loss": ' + "1" * 100_000 + "}", r"refused \(an integer of more than \d+ digits"),
])
@pytest.mark.parametrize("last", [False, True])
def test_a_line_python_cannot_hold_is_one_line_status_2(tmp_path, capsys, bad, reason, last):
    import re

    run = _run(tmp_path, [GOOD, bad] if last else [GOOD, bad, GOOD])
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(re.escape(f"{run / 'metrics.jsonl'}: line 2: ") + reason, err), err
    assert "set_int_max_str_digits" not in err and not (tmp_path / "r.html").exists()


def test_a_torn_last_line_and_a_damaged_middle_line_are_still_skipped(tmp_path):
    run = read_run(_run(tmp_path, [GOOD, '{"step": 2, "spl', GOOD, '{"step": 3, "split": "tr']))
    assert len(run.train) == 2
    assert run.notes[:2] == ["metrics.jsonl: line 2 is incomplete or damaged and was skipped",
                             "metrics.jsonl: last line is incomplete or damaged and was skipped"]
