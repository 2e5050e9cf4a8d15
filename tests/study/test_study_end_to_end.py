"""A tiny real study: it completes, survives SIGKILL, resumes without redoing finished runs, writes its outputs."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from study_helpers import TINY_BASE

pytestmark = pytest.mark.slow


def _study_command(out, *extra):
    sets = []
    for section, values in TINY_BASE.items():
        for key, value in values.items():
            if key != "name":
                sets += ["--set", f"{section}.{key}={json.dumps(value) if isinstance(value, bool) else value}"]
    return [sys.executable, "-m", "layerscale", "study", "--preset", "demo", "--methods", "prenorm,layerscale",
            "--depths", "1,2", "--seeds", "1", "--out", str(out), "--jobs", "1", "--threads", "1", *sets, *extra]


def _statuses(out):
    return sorted(p.parent.name for p in (out / "runs").glob("*/study_status.json"))


def test_study_killed_then_resumed_does_not_redo_finished_runs(tmp_path):
    out = tmp_path / "study"
    proc = subprocess.Popen(_study_command(out, "--no-report"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while not _statuses(out) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read().decode()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = _statuses(out)
    assert 1 <= len(finished_before) < 4
    stamps = {run_id: (out / "runs" / run_id / "metrics.jsonl").stat().st_mtime_ns for run_id in finished_before}

    result = subprocess.run(_study_command(out), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert f"{len(finished_before)} of 4 runs already done" in result.stdout + result.stderr
    assert _statuses(out) == ["layerscale-d1-s0", "layerscale-d2-s0", "prenorm-d1-s0", "prenorm-d2-s0"]
    for run_id, stamp in stamps.items():
        assert (out / "runs" / run_id / "metrics.jsonl").stat().st_mtime_ns == stamp, f"{run_id} was redone"
    table = (out / "results.md").read_text()
    assert table.count("\n| ") == 4 and "| layerscale | 2 | 1 |" in table
    assert "| layerscale | 2 | 1 |" in result.stdout
    assert (out / "report.html").is_file()
    assert (out / "accuracy_vs_depth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_study_rejects_an_unknown_method_before_writing(tmp_path):
    out = tmp_path / "study"
    result = subprocess.run([sys.executable, "-m", "layerscale", "study", "--preset", "demo", "--methods",
                             "prenorm,magic", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "unknown residual method 'magic'" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()
