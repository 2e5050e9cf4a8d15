"""``--reuse-from`` reads another person's study folder: no link followed, only a run's records copied, and a run
whose test numbers disagree with its own per-example test outcomes is not reused (issue 59, item 1)."""

import hashlib
import json
import os

import pytest
import torch
import yaml

from layerscale.study.design.grid import StudySpec
from layerscale.study.run.reuse import reuse_finished_runs
from layerscale.train.config.schema import TrainConfig
from layerscale.train.records.test_outcomes import write_test_outcomes
from study_helpers import TINY_BASE

SPEC = StudySpec(("prenorm",), (2,), (0, 1), TINY_BASE, lrs=(1e-3, 3e-3), tuning="grid")


def _old_run(old, seed, accuracy=0.75, correct=(1, 1, 1, 0)):
    """A finished run folder whose test record says ``accuracy`` and whose outcomes hold ``correct``."""
    run = SPEC.run(old, "prenorm", 2, 1e-3, seed, "final")
    run.run_dir.mkdir(parents=True)
    (run.run_dir / "config.yaml").write_text(yaml.safe_dump(TrainConfig.from_dict(run.config).to_dict()))
    (run.run_dir / "study_status.json").write_text(json.dumps({"status": "finished"}))
    test = {"step": 8, "split": "test", "on": "test", "loss": 0.5, "accuracy": accuracy, "samples": len(correct)}
    (run.run_dir / "metrics.jsonl").write_text(json.dumps({"step": 8, "split": "eval", "accuracy": 0.7}) + "\n"
                                               + json.dumps(test) + "\n")
    (run.run_dir / "summary.json").write_text(json.dumps({"step": 8, "test": test}))
    write_test_outcomes(run.run_dir, "correct", torch.tensor(correct, dtype=torch.bool))
    return run.run_dir


def _hashes(folder):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_a_consistent_run_is_reused_with_its_records_only(tmp_path):
    old_dir = _old_run(tmp_path / "old", 0)
    (old_dir / "notes.txt").write_text("not a record")
    messages = []
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=messages.append) == \
        ["prenorm-d2-lr0.001-s0"]
    copied = tmp_path / "new" / "runs" / "prenorm-d2-lr0.001-s0"
    assert sorted(p.name for p in copied.iterdir()) == ["config.yaml", "metrics.jsonl", "study_status.json",
                                                        "summary.json", "test_outcomes.json"]
    assert messages == [f"reused 1 finished run(s) from {tmp_path / 'old'}"]


@pytest.mark.parametrize("target", ["/dev/zero", "outside"])
def test_a_record_that_is_a_link_is_never_followed(tmp_path, target):
    outside = tmp_path / "secret.txt"
    outside.write_text("an outside file that must never reach the new study or its archive")
    old_dir = _old_run(tmp_path / "old", 0)
    (old_dir / "summary.json").unlink()
    (old_dir / "summary.json").symlink_to(outside if target == "outside" else target)
    before = _hashes(tmp_path / "old")
    messages = []
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=messages.append) == []
    assert messages[1].startswith("not reused: ") and "summary.json: refused (a symbolic link)" in messages[1]
    assert "\n" not in messages[1]
    assert not (tmp_path / "new" / "runs" / "prenorm-d2-lr0.001-s0").exists()
    assert not [p for p in (tmp_path / "new").rglob("*") if p.is_file()]  # nothing copied, no staging left
    assert _hashes(tmp_path / "old") == before


def test_a_run_folder_that_is_a_link_or_a_fifo_record_is_refused(tmp_path):
    elsewhere = _old_run(tmp_path / "elsewhere", 0)
    runs = tmp_path / "old" / "runs"
    runs.mkdir(parents=True)
    (runs / elsewhere.name).symlink_to(elsewhere)
    fifo_run = _old_run(tmp_path / "old", 1)
    (fifo_run / "config.yaml").unlink()
    os.mkfifo(fifo_run / "config.yaml")  # a FIFO would block a plain open() forever
    messages = []
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=messages.append) == []
    refusals = sorted(m for m in messages if m.startswith("not reused: "))
    assert len(refusals) == 2
    assert any("prenorm-d2-lr0.001-s0: refused (a symbolic link); expected a folder" in m for m in refusals)
    assert any("config.yaml: refused (not a regular file)" in m for m in refusals)


def test_runs_folder_that_is_a_link_is_refused(tmp_path):
    _old_run(tmp_path / "real", 0)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "runs").symlink_to(tmp_path / "real" / "runs")
    with pytest.raises(ValueError, match="runs/ is a symbolic link"):
        reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old")


def test_a_record_over_the_size_bound_is_refused_before_reading(tmp_path, monkeypatch):
    import layerscale.study.run.reuse as reuse

    old_dir = _old_run(tmp_path / "old", 0)
    monkeypatch.setattr(reuse, "MAX_RECORD_BYTES", 100)
    messages = []
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=messages.append) == []
    size = max(p.stat().st_size for p in old_dir.iterdir())
    assert f"refused ({size} bytes); expected at most 100 bytes" in messages[1]


def test_forged_test_accuracy_is_caught_by_the_runs_own_outcomes(tmp_path):
    _old_run(tmp_path / "old", 0, accuracy=0.999, correct=(1, 0, 1, 0, 1, 0))  # outcomes say 50 %
    _old_run(tmp_path / "old", 1, accuracy=0.5, correct=(1, 0, 1, 0, 1, 0))
    messages = []
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=messages.append) == \
        ["prenorm-d2-lr0.001-s1"]
    assert ("test accuracy 0.999 in its metrics.jsonl disagrees with its own test outcomes (0.5 over 6 examples)"
            in messages[1])
    assert not (tmp_path / "new" / "runs" / "prenorm-d2-lr0.001-s0").exists()


def test_runs_without_outcomes_are_counted_as_unchecked(tmp_path):
    old_dir = _old_run(tmp_path / "old", 0)
    (old_dir / "test_outcomes.json").unlink()
    messages = []
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=messages.append) == \
        ["prenorm-d2-lr0.001-s0"]
    assert "(1 without test outcomes to re-check them against)" in messages[0]


@pytest.mark.parametrize("status", [b"[1]", b'"x"', b"[" * 5000 + b"]" * 5000, b'{"status": 1e400}'])
def test_a_crafted_status_record_is_one_line_not_a_traceback(tmp_path, status):
    old_dir = _old_run(tmp_path / "old", 0)
    (old_dir / "study_status.json").write_bytes(status)
    messages = []
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=messages.append) == []
    assert len(messages) == 2 and "study_status.json" in messages[1] and "\n" not in messages[1]


def test_reusable_runs_finds_what_reuse_would_copy_and_writes_nothing(tmp_path):
    from layerscale.study.run.reuse import reusable_runs

    _old_run(tmp_path / "old", 0, accuracy=0.999, correct=(1, 0, 1, 0, 1, 0))  # forged: refused by both
    _old_run(tmp_path / "old", 1, accuracy=0.5, correct=(1, 0, 1, 0, 1, 0))
    before = _hashes(tmp_path / "old")
    assert reusable_runs(SPEC, tmp_path / "new", tmp_path / "old") == ["prenorm-d2-lr0.001-s1"]
    assert not (tmp_path / "new").exists() and _hashes(tmp_path / "old") == before
    assert reuse_finished_runs(SPEC, tmp_path / "new", tmp_path / "old", log=lambda _: None) == \
        ["prenorm-d2-lr0.001-s1"]
    assert reusable_runs(SPEC, tmp_path / "new", tmp_path / "old") == []  # already in the new study


def test_reusable_runs_refuses_a_runs_folder_that_is_a_link(tmp_path):
    from layerscale.study.run.reuse import reusable_runs

    _old_run(tmp_path / "elsewhere", 0)
    (tmp_path / "old").mkdir()
    os.symlink(tmp_path / "elsewhere" / "runs", tmp_path / "old" / "runs")
    with pytest.raises(ValueError, match="runs/ is a symbolic link"):
        reusable_runs(SPEC, tmp_path / "new", tmp_path / "old")
