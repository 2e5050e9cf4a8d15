"""One live process per run directory (``layerscale.train.state.run_lock``): ``--resume`` of a run another live process
trains is one line, status 2, and changes nothing; once that process is gone (even killed), the run resumes."""

import os
import signal
import subprocess
import sys


import pytest
from train_helpers import single_thread_env, snapshot, tiny_config

from layerscale.cli import main
from layerscale.train import run
from layerscale.train.state.run_lock import LOCK_FILE, RunDirectoryInUse, hold_run_dir

HOLD = "import sys, time\nfrom layerscale.train.state.run_lock import hold_run_dir\nwith hold_run_dir(sys.argv[1]):\n" \
       "    print('held', flush=True)\n    time.sleep(600)\n"


def test_a_run_held_by_a_live_process_is_refused_then_resumes_once_it_is_killed(tmp_path, capsys, finished_run):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], env=single_thread_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(run_dir)
        assert main(["train", "--resume", str(run_dir), "--set", "optim.max_steps=3"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"in use by pid {holder.pid}, a live process training this run" in err
        assert snapshot(run_dir) == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        holder.stdout.close()
    assert run(resume=run_dir, overrides=["optim.max_steps=3"]).step == 3  # a dead holder's lock is gone


def test_holding_is_reentrant_and_a_folder_with_only_the_lock_counts_as_empty(tmp_path):
    run_dir = tmp_path / "run"
    with hold_run_dir(run_dir), hold_run_dir(run_dir):
        assert (run_dir / LOCK_FILE).read_text().strip() == str(os.getpid())
    # The lock file left behind does not make the folder "not empty" for a new run.
    result = run(tiny_config(optim={"max_steps": 1}), out=run_dir)
    assert result.step == 1


def test_the_lock_is_taken_only_after_every_check(tmp_path):
    with pytest.raises(ValueError, match="unknown config key"):
        run(tiny_config(optim={"learning_rate": 1}), out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    assert issubclass(RunDirectoryInUse, FileExistsError)  # the CLI's bad-input exit status 2

