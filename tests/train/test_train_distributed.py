"""Two gloo processes under torchrun reach the weights and metrics of one process at the same global batch."""

import json
import re
import sys
from pathlib import Path

import pytest
import torch
from train_helpers import final_weights, run_command, tiny_config

from layerscale.train import run
from layerscale.train.records.metrics_log import read_metrics

# No augmentation, dropout or drop-path: per-rank random streams would differ from one process's stream.
CONFIG = tiny_config(data={"augment": False, "batch_size": 32},
                     optim={"max_steps": 12, "warmup_steps": 4},
                     run={"eval_every_steps": 6, "log_every_steps": 4, "checkpoint_every_steps": 6,
                          "device": "cpu"})  # two ranks on the CPU (gloo): one GPU would refuse a second rank


def _records(run_dir, split):
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r["split"] == split]


def test_two_processes_match_one_process_with_ddp_and_fsdp(tmp_path):
    config_file = tmp_path / "tiny.json"
    config_file.write_text(json.dumps(CONFIG))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(Path(__file__).with_name("torchrun_train_both.py")), str(config_file), str(tmp_path / "two")]
    done = run_command(command, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(re.findall(r"^done in .*: step 12,", done.stdout, re.M)) == 2  # rank 0 reports, once per strategy

    one = tmp_path / "one"
    run(CONFIG, out=one)
    expected = final_weights(one)
    for strategy in ("ddp", "fsdp"):
        two = tmp_path / f"two-{strategy}"
        got = final_weights(two)
        for name in expected:
            torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-5, msg=f"{strategy} {name}")
        # Metrics are reduced over ranks: every eval sample counted once, the same numbers as one process.
        for split, keys in (("eval", ("loss", "accuracy", "samples")), ("train", ("loss", "accuracy", "lr"))):
            ones, twos = _records(one, split), _records(two, split)
            assert [r["step"] for r in ones] == [r["step"] for r in twos] and ones
            for a, b in zip(ones, twos, strict=True):
                for key in keys:
                    assert b[key] == pytest.approx(a[key], abs=1e-5), (strategy, split, a["step"], key)
        assert _records(two, "eval")[-1]["samples"] == 359  # an odd count: no sample dropped or repeated
        # A checkpoint written under torchrun is the ordinary one: it resumes in a single process.
        resumed = run(resume=two / "checkpoints" / "step_00000006", overrides=["optim.max_steps=13"])
        assert resumed.step == 13
