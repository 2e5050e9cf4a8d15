"""Issue 30, item 7: a killed study leaves no worker training, and a second worker for a run folder that a live
one trains is refused by the run directory's lock — on submitit's local executor and on the local pool."""

import copy
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from layerscale.study.run.executors import ExecutorOptions
from layerscale.study.design.grid import StudySpec
from study_helpers import TINY_BASE, live_processes

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers in /proc")

# Long enough (2000 steps) that the run is still training when the test acts; the test never waits for its end.
BASE = copy.deepcopy(TINY_BASE)
BASE["optim"].update(epochs=200, max_steps=2000)
RUN_ID = "prenorm-d1-lr0.001-s0"
REPO = Path(__file__).resolve().parents[2]

STUDY = textwrap.dedent("""
    import copy, json, sys
    from layerscale.study.run.executors import ExecutorOptions
    from layerscale.study.design.grid import StudySpec
    from layerscale.study.study import run_study
    base, engine = json.loads(sys.argv[1]), sys.argv[2]
    options = ExecutorOptions("submitit", submitit_cluster="local") if engine == "submitit" else ExecutorOptions()
    run_study(StudySpec(("prenorm",), (1,), (0,), base=base, lrs=(1e-3,)), sys.argv[3], jobs=1, threads=1,
              report=False, progress=False, executor=options, log=lambda *_: None)
""")


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return env


def _workers(run_dir: Path) -> list[int]:
    """Pids of live (not zombie) worker processes training ``run_dir``."""
    return live_processes("layerscale.study.run.worker", str(run_dir))


def _start_study(out: Path, engine: str) -> subprocess.Popen:
    import json

    return subprocess.Popen([sys.executable, "-c", STUDY, json.dumps(BASE), engine, str(out)], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _wait_until_training(study: subprocess.Popen, run_dir: Path) -> list[int]:
    deadline = time.monotonic() + 240
    while not (_workers(run_dir) and list(run_dir.glob("checkpoints/step_*"))):
        assert study.poll() is None, f"the study ended early: {study.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "no worker reached a checkpoint within 240 s"
        time.sleep(0.05)
    return _workers(run_dir)


def _kill_everything(study: subprocess.Popen, run_dir: Path) -> None:
    """Clean-up whatever the test outcome: the study's session, then any worker of the run."""
    try:
        os.killpg(study.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    study.wait(timeout=30)
    study.stderr.close()
    for pid in _workers(run_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
def test_killing_a_submitit_local_study_leaves_no_worker_training(tmp_path):
    pytest.importorskip("submitit")
    out = tmp_path / "study"
    run_dir = out / "runs" / RUN_ID
    study = _start_study(out, "submitit")
    try:
        assert _wait_until_training(study, run_dir)
        os.kill(study.pid, signal.SIGKILL)  # the study alone: its job controllers live in other sessions' eyes
        study.wait(timeout=30)
        deadline = time.monotonic() + 60
        while _workers(run_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _workers(run_dir) == [], "a worker still trains after its study was killed"
        log = (out / "logs" / "final" / f"{RUN_ID}.log").read_text()
        assert "the study process" in log and "is gone; stopping this run's worker" in log, log[-2000:]
    finally:
        _kill_everything(study, run_dir)


@pytest.mark.slow
def test_a_concurrent_rerun_is_refused_by_the_lock_and_changes_nothing(tmp_path):
    """A second study in a folder the first still runs in is refused whole (issue 59 item 7): one line naming the
    first one's process, before any worker starts or any table is rewritten."""
    from layerscale.study.study import run_study
    from layerscale.train.state.run_lock import RunDirectoryInUse

    out = tmp_path / "study"
    run_dir = out / "runs" / RUN_ID
    first = _start_study(out, "local")
    try:
        [worker] = _wait_until_training(first, run_dir)
        before = {p: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"}
        with pytest.raises(RunDirectoryInUse, match=f"another study is running in this folder \\(pid {first.pid}\\)"):
            run_study(StudySpec(("prenorm",), (1,), (0,), base=copy.deepcopy(BASE), lrs=(1e-3,)), out,
                      jobs=1, threads=1, report=False, progress=False, executor=ExecutorOptions(),
                      log=lambda *_: None)
        assert {p: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"} == before
        assert _workers(run_dir) == [worker], "the rerun started a second worker or stopped the first"
        assert first.poll() is None  # the first study trains on, undisturbed
    finally:
        _kill_everything(first, run_dir)

