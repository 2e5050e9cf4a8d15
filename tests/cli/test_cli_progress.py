"""No carriage-return progress output when a command's output is not a terminal; ``--no-progress`` on the long
commands (``train``, ``analyze``, ``demo``). The commands run as a user's shell runs them, output captured."""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import termios

import pytest

from layerscale.cli import main
from layerscale.terminal import is_terminal, shows_progress

pytest.importorskip("sklearn")

CONFIG = {"model": {"name": "vit", "embed_dim": 16, "depth": 2, "num_heads": 2, "patch_size": 4},
          "data": {"name": "digits", "batch_size": 32},
          "optim": {"epochs": 1, "max_steps": 4, "warmup_steps": 1},
          "run": {"log_every_steps": 1, "checkpoint_every_steps": 4}}  # run.progress: the default, "auto"


def _layerscale(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "layerscale", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    (root / "tiny.json").write_text(json.dumps(CONFIG))
    done = _layerscale("train", "--config", str(root / "tiny.json"), "--out", str(root / "run"))
    return root, done


def test_train_writes_lines_not_a_bar_into_captured_output(trained):
    _, done = trained
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout + done.stderr
    assert "step 4/4" in done.stdout  # the progress is there, as log lines


def test_train_no_progress_prints_no_step_lines(trained):
    root, _ = trained
    done = _layerscale("train", "--config", str(root / "tiny.json"), "--out", str(root / "quiet"), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout + done.stderr and "step 4/4" not in done.stdout
    assert "  progress: none\n" in (root / "quiet" / "config.yaml").read_text()  # what --no-progress set


def test_analyze_draws_no_bar_into_captured_output(trained):
    pytest.importorskip("tqdm")
    root, _ = trained
    done = _layerscale("analyze", str(root / "run"), "--out", str(root / "analysis"), "--examples", "20",
                       "--batch-size", "10", "--bootstrap", "20", "--no-probes")
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout + done.stderr
    assert "wrote " in done.stdout


def test_demo_asks_the_study_for_a_bar_only_on_a_terminal(monkeypatch, tmp_path):
    import layerscale.study.study as study

    asked = []

    class Stop(Exception):
        pass

    def fake_run_study(*args, progress, **kwargs):
        asked.append(progress)
        raise Stop

    monkeypatch.setattr(study, "run_study", fake_run_study)
    for args in ([], ["--no-progress"]):
        with pytest.raises(Stop):
            main(["demo", "--out", str(tmp_path / "demo"), *args])
    assert asked == [False, False]  # pytest's captured stderr is not a terminal
    monkeypatch.setattr("layerscale.terminal.is_terminal", lambda stream: True)
    for args in ([], ["--no-progress"]):
        with pytest.raises(Stop):
            main(["demo", "--out", str(tmp_path / "demo"), *args])
    assert asked[2:] == [True, False]


def test_a_terminal_is_one_with_a_width():
    leader, follower = os.openpty()
    try:
        with open(follower, "w", closefd=False) as tty:
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            assert is_terminal(tty) and shows_progress(stream=tty) and not shows_progress(True, stream=tty)
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
            assert not is_terminal(tty)  # a 0 x 0 job console draws no bar
    finally:
        os.close(leader)
        os.close(follower)
    with open(os.devnull, "w") as devnull:
        assert not is_terminal(devnull)
    assert not is_terminal(object())
