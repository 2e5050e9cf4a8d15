"""A run killed before its first checkpoint is not stranded (issue 30, item 8): ``--resume RUN_DIR`` starts it
again from step 0 in its own directory, with its own config, and ends as a run never interrupted (same weights,
bit for bit on CPU; the killed attempt's records replaced, not repeated)."""

import json

import torch
from train_helpers import final_weights, kill_training_when, run_cli, snapshot, tiny_config

from layerscale.train import run
from layerscale.train.records.metrics_log import read_metrics

# Checkpoints only at the end: a kill after the first logged step comes before any checkpoint.
CONFIG = tiny_config(optim={"epochs": 1, "max_steps": 30, "warmup_steps": 3},
                     run={"log_every_steps": 1, "progress": "log", "tensorboard": False})


def _comparable(records):
    return [{k: v for k, v in r.items() if k not in ("time", "throughput")} for r in records]


def _kill_after_first_record(config_file, run_dir):
    kill_training_when(config_file, run_dir, lambda: read_metrics(run_dir / "metrics.jsonl"), "its first record")


def test_run_killed_before_its_first_checkpoint_restarts_with_resume(tmp_path):
    config_file = tmp_path / "tiny.json"
    config_file.write_text(json.dumps(CONFIG))
    killed = tmp_path / "killed"
    _kill_after_first_record(config_file, killed)
    assert not list(killed.glob("checkpoints/step_*")), "a checkpoint was written before the kill"
    assert read_metrics(killed / "metrics.jsonl"), "the killed attempt left no record; the test proved nothing"

    # A fresh --out into it is still refused (the folder is not empty), pointing at --resume, and changes nothing.
    before = snapshot(killed)
    again = run_cli("train", "--config", str(config_file), "--out", str(killed), cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and f"--resume {killed}" in again.stderr
    assert snapshot(killed) == before

    resumed = run_cli("train", "--resume", str(killed), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "restarting from step 0" in resumed.stdout

    run(CONFIG, out=tmp_path / "uninterrupted")
    expected, got = final_weights(tmp_path / "uninterrupted"), final_weights(killed)
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)
    assert _comparable(read_metrics(killed / "metrics.jsonl")) == \
        _comparable(read_metrics(tmp_path / "uninterrupted" / "metrics.jsonl"))
