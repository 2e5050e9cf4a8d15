"""Under torchrun a bad input or a non-finite stop prints one line (rank 0 alone), and the launcher wrapper
``python -m layerscale.train.launch`` hands the documented exit status to its caller (one real two-process
launch; the bad-input path is checked in-process with torchrun's environment, before any process group)."""

import json
import sys

import pytest
from train_helpers import run_command, tiny_config

from layerscale.cli import main

NONFINITE = tiny_config(optim={"lr": 1e20, "min_lr": 0.0, "weight_decay": 0.0, "warmup_steps": 0, "max_steps": 6},
                        run={"checkpoint_every_steps": 0, "device": "cpu"})  # two ranks: the CPU (gloo)


@pytest.mark.slow
def test_torchrun_nonfinite_stop_is_one_line_and_exit_status_3(tmp_path):
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(NONFINITE))
    command = [sys.executable, "-m", "layerscale.train.launch", "--standalone", "--nproc_per_node=2",
               "-m", "layerscale", "train", "--config", str(config_file), "--out", str(tmp_path / "run")]
    done = run_command(command, tmp_path, timeout=240)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 3, done.stderr[-3000:]
    assert len(err) == 1, done.stderr[-3000:]
    assert err[0].startswith("layerscale train: error: non-finite loss at step 2 (epoch 1) on 2 rank(s)")


@pytest.mark.parametrize("rank, lines", [("0", 1), ("1", 0)])
def test_bad_input_under_torchrun_is_printed_by_rank_0_alone(tmp_path, monkeypatch, capsys, rank, lines):
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(tiny_config(optim={"learning_rate": 0.1})))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setattr("layerscale.train.cli.OTHER_RANKS_GRACE_S", 0.0)
    assert main(["train", "--config", str(config_file), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == lines and all("unknown config key optim" in line and "learning_rate" in line for line in err)
    assert not (tmp_path / "run").exists()


def test_launcher_returns_the_first_failed_worker_status(monkeypatch):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from layerscale.train import launch

    def failing_run(args):
        failure = ProcessFailure(local_rank=0, pid=1, exitcode=2, error_file="<N/A>")
        raise ChildFailedError("layerscale", {0: failure})

    monkeypatch.setattr("torch.distributed.run.run", failing_run)
    assert launch.main(["--nproc_per_node=2", "-m", "layerscale", "train"]) == 2
