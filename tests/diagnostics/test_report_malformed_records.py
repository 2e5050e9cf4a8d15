"""A crafted diagnostics record in ``metrics.jsonl`` (issue 30, item 6): ``layerscale report`` refuses it in one
line with status 2 and writes no report, instead of an ``AttributeError`` from deep inside a plot."""

import json
import shutil

import pytest
import torch

from layerscale.cli import main
from layerscale.train import run

CONFIG = {"model": {"name": "vit", "embed_dim": 16, "depth": 2, "num_heads": 2, "patch_size": 2},
          "data": {"name": "digits", "batch_size": 32}, "optim": {"max_steps": 2}, "run": {"progress": "none"},
          "diagnostics": {"every": 1}}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("diag") / "run"
    torch.set_num_threads(1)
    run(CONFIG, out=directory)
    return directory


@pytest.mark.parametrize("blocks, message", [
    ([1, 2, 3], r"blocks\[0\] is 1, expected an object with a block 'name'"),
    ("x", r"'blocks' is 'x', expected a non-empty list of per-block objects"),
    ([{"name": "blocks.0", "attn": [1]}, {"name": "blocks.1"}], r"blocks\[0\]\.attn is \[1\], expected an object"),
    ([{"name": "blocks.0"}], r"'blocks' has 1 entries, the run's first diagnostics record has 2"),
])
def test_a_malformed_diagnostics_record_is_one_line_and_no_report(tmp_path, capsys, finished_run, blocks, message):
    import re

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"step": 2, "split": "diagnostics", "blocks": blocks}) + "\n")
    out = tmp_path / "report.html"
    assert main(["report", str(run_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the diagnostics record of step 2 is malformed" in err and re.search(message, err)
    assert not out.exists()


def test_the_untouched_run_still_reports(tmp_path, finished_run):
    assert main(["report", str(finished_run), "--out", str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").stat().st_size > 0
