"""``run.seed`` / ``data.split_seed`` of 50 digits (issue 59, item 8) ended in torch's "Overflow when unpacking long
long"; 2**64 - 1 was accepted and would overflow at ``seed + epoch`` after the run folder was written. Both are now
bounded to [0, 2**63 - 1] in the config's validation: one line naming the key, the value and the range, status 2,
every file unchanged."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch
from train_helpers import tiny_config

from layerscale.cli import main
from layerscale.train.config.schema import MAX_SEED, TrainConfig

FIFTY_DIGITS = "9" * 50


def hashes(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("key", ["run.seed", "data.split_seed"])
@pytest.mark.parametrize("value", [FIFTY_DIGITS, str(2**63), str(2**64 - 1), "-1"])
@pytest.mark.parametrize("how", ["new run", "resume"])
def test_a_seed_out_of_range_is_one_line_status_2(tmp_path, capsys, finished_run, key, value, how):
    shutil.copytree(finished_run, tmp_path / "run")
    (tmp_path / "config.json").write_text(json.dumps(tiny_config()))
    before = hashes(tmp_path)
    start = (["--resume", str(tmp_path / "run")] if how == "resume"
             else ["--config", str(tmp_path / "config.json"), "--out", str(tmp_path / "new")])
    assert main(["train", *start, "--set", f"{key}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"layerscale train: error: config key {key}: "), err
    assert err.rstrip().endswith("is out of range; allowed: in [0, 9223372036854775807]"), err
    assert hashes(tmp_path) == before


def test_the_largest_seed_and_every_seed_a_run_derives_from_it_are_accepted():
    config = TrainConfig.from_dict({"run": {"seed": MAX_SEED}, "data": {"split_seed": MAX_SEED}})
    assert config.run.seed == MAX_SEED == 2**63 - 1
    for derived in (MAX_SEED + 10_000, MAX_SEED + 63 + 7919 * 10**12):  # seed + epoch, seed + rank + 7919 * step
        torch.Generator().manual_seed(derived)
