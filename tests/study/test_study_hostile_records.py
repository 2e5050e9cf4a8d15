"""A study folder or archive someone else made (issue 59, items 2, 4, 7): every crafted record, archive or
concurrent study is one line and exit status 2, and every file already in the folder is left as it was."""

import hashlib
import io
import json
import lzma
import subprocess
import sys
import tarfile
import time

import pytest

from layerscale.cli import main
from layerscale.study.design.grid import StudySpec
from layerscale.study.design.metric import Metric
from layerscale.study.design.plan import StudyPlan, write_plan
from study_helpers import TINY_BASE, write_fake_run

SPEC = StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), TINY_BASE, shared_table=False)


def _study(folder):
    """A finished untuned study folder, as --report-only reads it (no training)."""
    folder.mkdir(parents=True)
    from layerscale.atomic_io import write_json_atomic
    from layerscale.study.run.executors import ExecutorOptions

    write_json_atomic(folder / "study.json", {**SPEC.to_dict(), "executor": ExecutorOptions().to_dict()})
    write_plan(folder, StudyPlan(20, Metric.for_language_model(False), "digits", {}))
    for method in SPEC.methods:
        for seed in SPEC.seeds:
            run = SPEC.run(folder, method, 2, SPEC.shared_lr, seed, "final")
            write_fake_run(run.run_dir, [0.5, 0.6], [1.0, 0.9], test_accuracy=0.6 + 0.01 * seed)
    return folder


def _hashes(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink() and p.name != ".lock"}


def _report_only(folder, capsys):
    code = main(["study", "--out", str(folder), "--report-only", "--no-report"])
    err = capsys.readouterr().err.strip()
    return code, err


def test_the_untouched_folder_reports(tmp_path, capsys):
    assert _report_only(_study(tmp_path / "s"), capsys)[0] == 0


@pytest.mark.parametrize("name, content, expected", [
    ("runs/prenorm-d2-lr0.001-s0/study_status.json", b"[1]", "a JSON list"),
    ("runs/prenorm-d2-lr0.001-s0/study_status.json", b'"x"', "a JSON str"),
    ("runs/prenorm-d2-lr0.001-s0/study_status.json", b"[" * 3000 + b"]" * 3000, "nested too deep"),
    ("runs/prenorm-d2-lr0.001-s0/study_status.json", b'{"status": "won"}', "status 'won' refused"),
    ("runs/prenorm-d2-lr0.001-s0/metrics.jsonl", b'{"step": 1e400, "split": "eval"}\n{"step": 1}\n', "step 'inf' refused"),
    ("runs/prenorm-d2-lr0.001-s0/metrics.jsonl", b'{"step": null, "split": "eval"}\n{"step": 1}\n', "step 'None' refused"),
    ("runs/prenorm-d2-lr0.001-s0/metrics.jsonl", b'{"a":' * 900 + b"1" + b"}" * 900 + b'\n{"step": 1}\n',
     "nested too deep"),
    ("plan.json", b'{"total_steps": 1e400, "language_model": false, "data_description": "d", "params": []}',
     "the number 1e400 overflows a float"),
    ("plan.json", b"[" * 3000 + b"]" * 3000, "nested too deep"),
    ("study.json", b'{"methods": ' + b"[" * 500 + b"]" * 500 + b"}", "nested too deep"),
    ("study.json", None, "(field 'target': expected a number or null, got 'x' (a JSON string))"),
])
def test_a_crafted_record_is_one_line_and_rc_2(tmp_path, capsys, name, content, expected):
    folder = _study(tmp_path / "s")
    if content is None:  # study.json whose target is a string
        content = json.dumps({**json.loads((folder / "study.json").read_text()), "target": "x"}).encode()
    (folder / name).write_bytes(content)
    before = _hashes(folder)
    code, err = _report_only(folder, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and expected in err, err
    assert "Traceback" not in err
    assert _hashes(folder) == before


def test_an_out_of_range_accuracy_is_no_value(tmp_path, capsys):
    folder = _study(tmp_path / "s")
    run = folder / "runs" / "prenorm-d2-lr0.001-s0"
    write_fake_run(run, [0.5, 0.6], [1.0, 0.9], test_accuracy=1e308)
    assert _report_only(folder, capsys)[0] == 0
    rows = (folder / "runs.csv").read_text()
    assert "1e+310" not in rows and "inf" not in rows


def _archive_with(folder, members):
    """Replace the study's runs/ with an archive holding ``members`` (name -> bytes, in order)."""
    import shutil

    shutil.rmtree(folder / "runs")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (folder / "runs.tar.xz").write_bytes(buffer.getvalue())


@pytest.mark.parametrize("case", ["duplicate", "too large", "corrupt xz", "columnar bomb", "columnar lines"])
def test_a_hostile_archive_is_refused_before_anything_is_extracted(tmp_path, capsys, monkeypatch, case):
    import layerscale.study.run.archive_reading as archive_reading
    import layerscale.study.run.columnar_metrics as columnar

    folder = _study(tmp_path / "s")
    status = b'{"status": "finished", "step": 20}'
    if case == "duplicate":
        _archive_with(folder, [("runs/a/study_status.json", status), ("runs/a/study_status.json", b"{}")])
        expected = "appears twice"
    elif case == "too large":
        monkeypatch.setattr(archive_reading, "MAX_MEMBER_BYTES", 1000)
        _archive_with(folder, [("runs/a/metrics.jsonl", b"x" * 1001)])
        expected = "is 1001 bytes; at most 1000 bytes a member"
    elif case == "corrupt xz":
        _archive_with(folder, [("runs/a/study_status.json", status)])
        data = bytearray((folder / "runs.tar.xz").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (folder / "runs.tar.xz").write_bytes(bytes(data))
        expected = "not a readable runs archive"
    else:
        skeleton = {"split": None, "step": None, "big": None}
        constants = ["diagnostics", None, "y" * 1_000_000]
        lines = [0] * (10_000 if case == "columnar bomb" else 20)
        if case == "columnar lines":
            monkeypatch.setattr(columnar, "MAX_LINES", 10)
        document = {"format": "layerscale.metrics-columns", "version": 1, "lines": lines,
                    "groups": [{"skeleton": skeleton, "constants": constants, "varying": [1],
                                "columns": [list(range(len(lines)))]}]}
        _archive_with(folder, [("runs/a/metrics.columns.json", json.dumps(document).encode())])
        expected = "decodes to more than" if case == "columnar bomb" else "20 lines; at most 10"
    before = _hashes(folder)
    started = time.monotonic()
    code, err = _report_only(folder, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and expected in err, err
    assert time.monotonic() - started < 30
    assert _hashes(folder) == before
    assert not [p for p in folder.iterdir() if p.name.startswith((".unpacking", "layerscale-report"))]


def test_a_link_among_the_study_files_is_not_copied_into_the_report(tmp_path, capsys):
    folder = _study(tmp_path / "s")
    from layerscale.study.run.archive import pack_runs

    pack_runs(folder)
    import shutil

    shutil.rmtree(folder / "runs")
    (tmp_path / "secret").write_text("outside")
    (folder / "notes.txt").symlink_to(tmp_path / "secret")
    assert _report_only(folder, capsys)[0] == 0
    assert (folder / "notes.txt").is_symlink()  # left as it was, never read


def test_a_second_study_in_a_held_folder_is_refused_whole(tmp_path, capsys):
    folder = _study(tmp_path / "s")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom layerscale.train.state.run_lock import hold_run_dir\n"
         f"with hold_run_dir({str(folder)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _hashes(folder)
        code, err = _report_only(folder, capsys)
        assert code == 2 and len(err.splitlines()) == 1 and "another study is running in this folder" in err, err
        assert f"pid {holder.pid}" in err
        assert _hashes(folder) == before
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("operation", ["unpack", "report"])
def test_sigterm_during_unpack_or_report_leaves_no_temporary_folder(tmp_path, operation):
    """A stop (SIGTERM) while the archive is being read removes the temporary folder, as any error does."""
    import os
    import signal

    folder = _study(tmp_path / "s")
    from layerscale.study.run.archive import pack_runs

    pack_runs(folder)
    import shutil

    shutil.rmtree(folder / "runs")
    marker = tmp_path / "extracting"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    script = (
        "import sys, time, pathlib\n"
        "import layerscale.study.run.archive as archive\n"
        "real = archive._extract\n"
        "def slow(a, into):\n"
        "    real(a, into)\n"
        f"    pathlib.Path({str(marker)!r}).write_text('x')\n"
        "    time.sleep(60)\n"
        "archive._extract = slow\n"
        + (f"archive.unpack_runs({str(folder)!r})\n" if operation == "unpack" else
           f"archive.report_from_archive(pathlib.Path({str(folder)!r}), lambda copy: None)\n"))
    process = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(scratch)})
    try:
        for _ in range(600):
            if marker.exists() or process.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 143
    finally:
        process.kill()
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".unpacking-")]
    assert not list(scratch.iterdir())
