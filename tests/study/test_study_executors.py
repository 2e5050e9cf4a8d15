"""The study on other engines: submitit (its LocalExecutor: real job processes, as on Slurm) and a local Ray
instance give the local pool's final weights, a run stopped under each resumes from its checkpoint, a failed run
is reported with its log, and ``--dry-run`` writes nothing."""

import argparse
import copy
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from layerscale.study.run.executors import ExecutorOptions, parse_slurm_time, resolve_options
from layerscale.study.run.executors.cli_args import shard
from layerscale.study.design.grid import SPEC_FILE, StudySpec
from study_helpers import TINY_BASE

# Long enough (24 steps, a checkpoint every 2) that a run is still training when the test stops it.
BASE = copy.deepcopy(TINY_BASE)
BASE["optim"].update(epochs=2, max_steps=24)
RUN_ID = "prenorm-d1-lr0.001-s0"


def _spec(methods=("prenorm",)) -> StudySpec:
    return StudySpec(methods, (1,), (0,), base=copy.deepcopy(BASE), lrs=(1e-3,))


def _study(out: Path, executor: ExecutorOptions, methods=("prenorm",)):
    from layerscale.study.study import run_study

    return run_study(_spec(methods), out, jobs=1, threads=1, report=False, progress=False, executor=executor,
                     log=lambda *_: None)


def _final_weights(run_dir: Path) -> dict:
    from safetensors.torch import load_file

    from layerscale.train.state.checkpoint import MODEL_FILE, latest_checkpoint

    return load_file(str(latest_checkpoint(run_dir) / MODEL_FILE))


def _assert_same_weights(a: dict, b: dict) -> None:
    import torch

    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs"


def _processes():
    """``(pid, ppid, cmdline)`` of every live process (from /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            yield int(entry.name), int(fields[1]), cmdline


def _stop_when_checkpointed(run_dir: Path, stop) -> threading.Thread:
    """In the background: once the run has its first checkpoint, call ``stop(worker_pid, worker_ppid)``."""
    def watch():
        deadline = time.time() + 240
        while time.time() < deadline:
            if list((run_dir / "checkpoints").glob("step_*")):
                for pid, ppid, cmdline in _processes():
                    if str(run_dir) in cmdline and "layerscale.study.run.worker" in cmdline:
                        stop(pid, ppid)
                        return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def local_weights(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "study"
    summary = _study(out, ExecutorOptions())
    assert summary.failures == []
    return _final_weights(out / "runs" / RUN_ID)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the job's processes in /proc")
def test_submitit_job_preempted_requeues_resumes_and_matches_the_local_pool(tmp_path, local_weights):
    pytest.importorskip("submitit")
    out = tmp_path / "study"
    run_dir = out / "runs" / RUN_ID
    broken = out / "runs" / "layerscale-d1-lr0.001-s0"  # a file where its run folder goes: that job fails
    broken.parent.mkdir(parents=True)
    broken.write_text("not a run folder")
    # Slurm's preemption / time-limit warning: SIGUSR2 to the job process (the worker's parent)
    watcher = _stop_when_checkpointed(run_dir, lambda pid, ppid: os.kill(ppid, signal.SIGUSR2))
    summary = _study(out, ExecutorOptions("submitit", submitit_cluster="local"), methods=("prenorm", "layerscale"))
    watcher.join(timeout=5)
    [failure] = summary.failures  # the failed job is reported with its log; the other run went on
    assert failure.run_id == broken.name and failure.exit_code == 1
    assert failure.log == out / "logs" / "final" / f"{broken.name}.log" and "NotADirectoryError" in failure.last_line
    log = (out / "logs" / "final" / f"{RUN_ID}.log").read_text()
    assert "requeued, it resumes from its latest checkpoint" in log, log
    assert f"{RUN_ID}: resuming from step_" in log, log
    assert json.loads((run_dir / "study_status.json").read_text())["status"] == "finished"
    _assert_same_weights(_final_weights(run_dir), local_weights)
    saved = json.loads((out / SPEC_FILE).read_text())
    assert saved["executor"]["engine"] == "submitit"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the task's processes in /proc")
def test_ray_task_whose_worker_dies_is_retried_resumes_and_matches_the_local_pool(tmp_path, local_weights):
    ray = pytest.importorskip("ray")
    out = tmp_path / "study"
    run_dir = out / "runs" / RUN_ID
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # a lost Ray worker (node failure): SIGKILL the process running the task, the worker's parent
        watcher = _stop_when_checkpointed(run_dir, lambda pid, ppid: os.kill(ppid, signal.SIGKILL))
        summary = _study(out, ExecutorOptions("ray"))
        watcher.join(timeout=5)
    finally:
        ray.shutdown()
    assert summary.failures == []
    log = (out / "logs" / "final" / f"{RUN_ID}.log").read_text()
    assert f"{RUN_ID}: resuming from step_" in log, log
    _assert_same_weights(_final_weights(run_dir), local_weights)


def test_a_run_that_fails_or_leaves_no_status_is_reported_with_its_log(tmp_path):
    from layerscale.study.run.executors.tracker import PoolTracker

    spec = _spec()
    runs = [spec.run(tmp_path, "prenorm", 1, lr, 0, "final") for lr in (1e-3, 2e-3, 3e-3)]
    logs = []
    for run in runs:
        log = tmp_path / f"{run.run_id}.log"
        log.write_text("starting\nValueError: boom\n")
        logs.append(log)
    runs[0].run_dir.mkdir(parents=True)
    (runs[0].run_dir / "study_status.json").write_text(json.dumps({"status": "finished", "step": 8}))
    tracker = PoolTracker(runs, runs, "final runs", progress=False, log=lambda *_: None)
    tracker.finished(runs[0], logs[0], 0)
    tracker.finished(runs[1], logs[1], 0)  # exit 0 but no status: the worker never got to the end
    tracker.finished(runs[2], logs[2], None, "Ray task failed (WorkerCrashedError)")
    assert [f.run_id for f in tracker.failures] == [runs[1].run_id, runs[2].run_id]
    assert tracker.failures[0].log == logs[1] and tracker.failures[0].last_line == "ValueError: boom"
    assert "WorkerCrashedError" in str(tracker.failures[1]) and str(logs[2]) in str(tracker.failures[1])


@pytest.mark.parametrize("text, minutes", [("90", 90), (45, 45), ("1:30:00", 90), ("30:30", 31),
                                           ("2-00:00:00", 2880), ("1-12", 2160)])
def test_slurm_time_limits_in_minutes(text, minutes):
    assert parse_slurm_time(text) == minutes


@pytest.mark.parametrize("options, message", [
    ({"engine": "kubernetes"}, "--executor 'kubernetes' is not one of"),
    ({"slurm_time": "soon"}, "--slurm-time 'soon' is not a Slurm time limit"),
    ({"engine": "ray", "nodes_per_run": 2, "gpus_per_run": 1}, "--nodes-per-run 2 needs --executor submitit"),
    ({"engine": "submitit", "nodes_per_run": 2}, "needs --gpus-per-run >= 1"),
    ({"engine": "ray", "cpus_per_run": 0}, "--cpus-per-run must be an integer >= 1, got 0"),
    ({"gpus_per_run": 1}, "--gpus-per-run 1 needs --executor submitit or ray"),
])
def test_bad_executor_options_are_one_clear_error(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        ExecutorOptions(**options)


@pytest.mark.parametrize("text, pair", [("0/1", (0, 1)), ("1/2", (1, 2)), ("3/4", (3, 4))])
def test_a_shard_is_its_index_and_count(text, pair):
    assert shard(text) == pair


@pytest.mark.parametrize("text", ["2/2", "-1/2", "0/0", "1", "a/b", "0/1/2", ""])
def test_a_bad_shard_is_one_clear_error_and_exit_status_2(text, capsys):
    parser = argparse.ArgumentParser(prog="prog")
    parser.add_argument("--shard", type=shard)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args([f"--shard={text}"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"prog: error: argument --shard: {text!r}: expected I/N with 0 <= I < N, e.g. 0/2")


def test_executor_options_are_saved_reused_and_not_part_of_the_design(tmp_path):
    spec = _spec()
    saved = ExecutorOptions("submitit", slurm_partition="gpu", slurm_time="2:00:00", gpus_per_run=1)
    (tmp_path / SPEC_FILE).write_text(json.dumps({**spec.to_dict(), "executor": saved.to_dict()}))
    spec.check_compatible(tmp_path)  # another executor is the same study
    assert resolve_options(tmp_path / SPEC_FILE, {"engine": None, "slurm_time": "30"}) == \
        ExecutorOptions("submitit", slurm_partition="gpu", slurm_time=30, gpus_per_run=1)
    assert resolve_options(tmp_path / SPEC_FILE, {"engine": "local"}) == ExecutorOptions()
    other = StudySpec(("prenorm",), (2,), (0,), base=copy.deepcopy(BASE), lrs=(1e-3,))
    with pytest.raises(ValueError, match="different depths"):
        other.check_compatible(tmp_path)


def test_dry_run_lists_the_runs_and_the_submission_and_writes_nothing(tmp_path, capsys):
    pytest.importorskip("submitit")
    from layerscale.cli import main

    out = tmp_path / "study"
    sets = [arg for section, values in BASE.items() for key, value in values.items() if key != "name"
            for arg in ("--set", f"{section}.{key}={json.dumps(value) if isinstance(value, bool) else value}")]
    code = main(["study", "--preset", "demo", "--methods", "prenorm,layerscale", "--depths", "1", "--seeds", "2",
                 "--lrs", "1e-3,3e-3", "--tuning", "halving", "--out", str(out), "--executor", "submitit",
                 "--slurm-partition", "gpu",
                 "--slurm-time", "4:00:00", "--gpus-per-run", "2", "--dry-run", *sets])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = captured.out
    assert "tuning rung 0: 8 run(s)" in text and "seeds [1000, 1001]" in text and "prenorm-d1-lr0.003-s1001" in text
    assert "final runs at the shared rate 0.001: 4 run(s)" in text and "layerscale-d1-lr0.001-s1" in text
    assert "final runs at each cell's tuned rate: up to 4 more" in text and "the rates depend on the tuning" in text
    assert "slurm_partition = gpu" in text and "timeout_min = 240" in text and "gpus_per_node = 2" in text
    assert "--nproc_per_node=2" in text
    assert not out.exists()


@pytest.mark.parametrize("engine, module, extra", [("submitit", "submitit", "slurm"), ("ray", "ray", "ray")])
def test_a_missing_engine_is_one_line_naming_its_extra(monkeypatch, engine, module, extra):
    import layerscale.study.run.executors as executors

    engine_module = {"submitit": "submitit_slurm", "ray": "ray_cluster"}[engine]
    monkeypatch.setitem(sys.modules, module, None)  # "not installed"
    monkeypatch.delitem(sys.modules, f"layerscale.study.run.executors.{engine_module}", raising=False)
    monkeypatch.delattr(executors, engine_module, raising=False)
    with pytest.raises(ImportError) as caught:
        executors.load_engine(engine)
    assert str(caught.value) == f"--executor {engine} needs {module}: pip install 'torch-layerscale[{extra}]'"


def test_a_multi_process_run_is_torchrun_of_the_same_worker_on_every_node(tmp_path):
    from layerscale.study.run.executors.run_task import task_for, worker_command

    run = _spec().run(tmp_path, "prenorm", 1, 1e-3, 0, "final")
    one_process = worker_command(task_for(run, tmp_path, 4), parent_pid=123)
    assert one_process[1] == "-c" and one_process[3:] == ["123", str(run.run_dir), str(
        tmp_path / "configs" / "final" / f"{run.run_id}.json"), "4"]
    one_node = worker_command(task_for(run, tmp_path, 4, gpus_per_node=8))
    assert "--standalone" in one_node and "--nproc_per_node=8" in one_node
    second_node = worker_command(task_for(run, tmp_path, 4, gpus_per_node=8, nodes=2), node_rank=1,
                                 master_addr="node-a", master_port=23456)
    assert ["--nnodes=2", "--node_rank=1", "--master_addr=node-a", "--master_port=23456"] == second_node[3:7]
    assert second_node[-4:] == ["layerscale.study.run.executors.ddp_worker", str(run.run_dir), one_process[5], "4"]


def test_progress_advances_by_each_runs_work_not_by_run_count(tmp_path, capsys):
    pytest.importorskip("tqdm")
    from layerscale.study.run.executors.tracker import PoolTracker, run_weight

    spec = StudySpec(("prenorm",), (2, 8), (0,), base=copy.deepcopy(BASE), lrs=(1e-3,))
    shallow, deep = (spec.run(tmp_path, "prenorm", d, 1e-3, 0, "final") for d in (2, 8))
    assert run_weight(deep) == 4 * run_weight(shallow)  # same width: work grows with the blocks
    tracker = PoolTracker([shallow, deep], [shallow, deep], "final runs", progress=True, log=lambda *_: None)
    shallow.run_dir.mkdir(parents=True)
    (shallow.run_dir / "study_status.json").write_text(json.dumps({"status": "finished", "step": 8}))
    tracker.finished(shallow, tmp_path / "log", 0)
    assert tracker._bar.n == run_weight(shallow) and tracker._bar.total == 5 * run_weight(shallow)
    tracker.close()
    assert "1/2 runs" in capsys.readouterr().err
