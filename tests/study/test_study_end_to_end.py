"""Tiny real studies: tuned with intervals; killed and resumed; killed while workers start; refused before
writing anything."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from study_helpers import TINY_BASE, live_processes

pytestmark = pytest.mark.slow


def _study_command(out, *extra, methods="prenorm,layerscale", depths="1,2", seeds=1, lrs="1e-3"):
    sets = []
    for section, values in TINY_BASE.items():
        for key, value in values.items():
            if key != "name":
                sets += ["--set", f"{section}.{key}={json.dumps(value) if isinstance(value, bool) else value}"]
    return [sys.executable, "-m", "layerscale", "study", "--preset", "demo", "--methods", methods, "--depths", depths,
            "--seeds", str(seeds), "--lrs", lrs, "--out", str(out), "--jobs", "2", "--threads", "1", *sets, *extra]


def _statuses(out):
    return sorted(p.parent.name for p in (out / "runs").glob("*/study_status.json"))


def test_a_tuned_study_writes_adjusted_verdicts_per_seed_values_and_the_interaction_table(tmp_path):
    """The tiny digits study of the statistics procedure: 2 methods, 2 depths, 3 seeds, 2 rates (two tuning seeds
    each), 8 steps; no shared table and no grid extension to keep it short (the extension has its own test)."""
    out = tmp_path / "study"
    result = subprocess.run(_study_command(out, "--tuning", "halving", "--bootstrap", "200", "--no-shared-table",
                                           "--extend-grid", "0",
                                           methods="prenorm,layerscale",
                                           depths="1,2", seeds=3, lrs="1e-3,3e-3"),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    tuned = {(r["method"], int(r["depth"])): r for r in rows if r["table"] == "tuned"}
    tuning = json.loads((out / "tuning.json").read_text())
    assert tuning["mode"] == "halving" and tuning["seeds"] == [1000, 1001]
    for cell in tuning["cells"]:
        assert float(tuned[(cell["method"], cell["depth"])]["lr"]) == cell["chosen_lr"]
        per_seed = cell["rungs"][0]["per_seed"]
        assert all(len(v) == 2 for v in per_seed.values())  # two tuning seeds per rate
    for row in tuned.values():
        assert 0.0 <= float(row["test_ci_low"]) <= float(row["test_mean"]) <= float(row["test_ci_high"]) <= 100.0
        assert row["test_n"] == "3" and len(row["test_per_seed"].split(";")) == 3
    primary = tuned[("layerscale", 2)]
    assert primary["family"] == "primary" and primary["adjustment"] == "holm"
    assert float(primary["p_adj"]) == pytest.approx(float(primary["p_raw"]))  # a family of one
    assert primary["bootstrap_low"] and float(primary["bootstrap_low"]) <= float(primary["bootstrap_high"])
    assert tuned[("layerscale", 1)]["family"] == "exploratory" and tuned[("layerscale", 1)]["adjustment"] == "bh"
    interaction = [r for r in rows if r["table"] == "interaction"]
    assert [(r["method"], r["depth_from"], r["depth"]) for r in interaction] == [("layerscale", "1", "2")]
    assert interaction[0]["p_raw"] and interaction[0]["diff_mean"]
    markdown = (out / "results.md").read_text()
    for section in ("## Primary comparisons (Holm-adjusted)", "## Depth use", "**Depth-use interaction**",
                    "## Per-seed values", "## Learning-rate choice", "Benjamini & Hochberg (1995"):
        assert section in markdown
    # the tuning runs never read the test split; every final run read it exactly once and kept its outcomes
    for metrics in (out / "runs" / "tune").glob("*/metrics.jsonl"):
        assert '"split": "test"' not in metrics.read_text()
    for metrics in (out / "runs").glob("*-s[012]/metrics.jsonl"):
        assert metrics.read_text().count('"split": "test"') == 1
        assert (metrics.parent / "test_outcomes.json").is_file()
    assert (out / "report.html").is_file()
    # rebuilt from the folder alone (the design read from study.json), byte for byte
    before = (out / "results.md").read_bytes(), (out / "results.csv").read_bytes()
    rebuilt = subprocess.run([sys.executable, "-m", "layerscale", "study", "--out", str(out), "--report-only",
                              "--no-report"], capture_output=True, text=True, timeout=600)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert ((out / "results.md").read_bytes(), (out / "results.csv").read_bytes()) == before

def test_study_killed_then_resumed_does_not_redo_finished_runs(tmp_path):
    out = tmp_path / "study"
    proc = subprocess.Popen(_study_command(out, "--no-report", "--jobs", "1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while not _statuses(out) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read().decode()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = _statuses(out)
    assert 1 <= len(finished_before) < 4
    stamps = {run_id: (out / "runs" / run_id / "metrics.jsonl").stat().st_mtime_ns for run_id in finished_before}

    result = subprocess.run(_study_command(out, "--no-report"), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert f"{len(finished_before)} of 4 runs already done" in result.stdout + result.stderr
    assert _statuses(out) == ["layerscale-d1-lr0.001-s0", "layerscale-d2-lr0.001-s0", "prenorm-d1-lr0.001-s0",
                              "prenorm-d2-lr0.001-s0"]
    for run_id, stamp in stamps.items():
        assert (out / "runs" / run_id / "metrics.jsonl").stat().st_mtime_ns == stamp, f"{run_id} was redone"


def _workers_of(study_dir: Path) -> list[int]:
    """PIDs of live processes whose command line names ``study_dir`` (the study's workers)."""
    return live_processes(str(study_dir), "worker")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_a_study_killed_while_its_workers_start_leaves_no_worker(tmp_path):
    out = tmp_path / "study"
    proc = subprocess.Popen(_study_command(out, "--no-report"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not _workers_of(out) and time.time() < deadline:
        time.sleep(0.02)
    assert _workers_of(out), "no worker started"
    os.kill(proc.pid, signal.SIGKILL)  # the workers are still importing torch
    proc.wait()
    deadline = time.time() + 30
    while _workers_of(out) and time.time() < deadline:
        time.sleep(0.2)
    assert _workers_of(out) == []
    assert _statuses(out) == []  # nobody trained to the end behind the dead study's back


@pytest.mark.parametrize("args, message", [
    (["--methods", "prenorm,magic"], "unknown residual method 'magic'"),
    (["--set", "model.patch_size=3"], "patch_size 3 cannot take the 8x8 images"),
    (["--set", "model.num_heads=3"], "num_heads"),
    (["--lrs", "1e-3,3e-3", "--validation-fraction", "0"], "needs a validation split"),
])
def test_a_bad_study_is_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "study"
    result = subprocess.run([sys.executable, "-m", "layerscale", "study", "--preset", "demo", "--out", str(out),
                             *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()
