"""A run killed with SIGKILL and resumed ends with the same weights, bit for bit on CPU, as one never interrupted."""

import json

import torch
from train_helpers import final_weights, kill_training_when, run_cli, tiny_config

from layerscale.train import run
from layerscale.train.records.metrics_log import read_metrics

# Dropout, drop-path and augmentation on: the resumed run must also replay the random draws.
CONFIG = tiny_config(model={"drop_rate": 0.1, "drop_path_rate": 0.1},
                     optim={"epochs": 3, "max_steps": 50, "warmup_steps": 10},
                     run={"checkpoint_every_steps": 7, "keep_checkpoints": 20, "log_every_steps": 7,
                          "progress": "log"})


def _comparable(records):
    return [{k: v for k, v in r.items() if k not in ("time", "throughput")} for r in records]


def test_sigkill_then_resume_equals_uninterrupted_run(tmp_path):
    config_file = tmp_path / "tiny.json"
    config_file.write_text(json.dumps(CONFIG))
    killed = tmp_path / "killed"
    kill_training_when(config_file, killed, lambda: (killed / "checkpoints").is_dir()
                       and any((killed / "checkpoints").glob("step_*")), "its first checkpoint")
    survivors = sorted(p.name for p in (killed / "checkpoints").glob("step_*"))
    assert "step_00000050" not in survivors, "the run finished before it was killed; the test proved nothing"

    resumed = run_cli("train", "--resume", str(killed), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stdout and "step 50" in resumed.stdout

    reference = run(CONFIG, out=tmp_path / "uninterrupted")
    assert reference.step == 50
    expected, got = final_weights(tmp_path / "uninterrupted"), final_weights(killed)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"{name} differs after resume"
    # The metric stream of the resumed run is the uninterrupted one: nothing repeated, nothing lost.
    assert _comparable(read_metrics(killed / "metrics.jsonl")) == \
        _comparable(read_metrics(tmp_path / "uninterrupted" / "metrics.jsonl"))
