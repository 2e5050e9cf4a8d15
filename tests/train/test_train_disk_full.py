"""A full disk while a checkpoint is written (issue 59, item 6): one line, status 2, no chained tracebacks, nothing
already on disk lost or changed, and the run resumes to the very weights of an uninterrupted one. The same for the
other files a run writes: a ``metrics.jsonl`` record, and any file written whole (``summary.json``, ``config.yaml``).

The disk fills up inside the writers, as a real full disk does: the file that ``torch.save`` writes
``train_state.pt`` through raises ``OSError(ENOSPC)`` part-way (torch then fails again closing the half-written
archive: before the fix, two chained tracebacks of 44 lines), and safetensors reports the system's error as its own
``SafetensorError(... (os error 28))``.
"""

from __future__ import annotations

import errno
import hashlib
import json

import pytest
import torch
from train_helpers import final_weights, tiny_config

import layerscale.train.state.checkpoint as checkpoint_module
import layerscale.train.records.metrics_log as metrics_module
from layerscale.atomic_io import write_text_atomic
from layerscale.cli import main

safetensors = pytest.importorskip("safetensors")

CONFIG = tiny_config(optim={"max_steps": 6, "warmup_steps": 3}, run={"checkpoint_every_steps": 2,
                                                                     "keep_checkpoints": 3})
FAILING = "step_00000004"


def hashes(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".tmp-" not in str(p.relative_to(folder))}


class _FullDisk:
    """A binary file that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, path, room):
        self._file, self._room = open(path, "wb"), room  # noqa: SIM115 (closed by close())

    def write(self, data):
        if len(data) > self._room:
            self._file.write(bytes(data)[: self._room])
            self._room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= len(data)
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


def _arm(monkeypatch, run_dir, snapshots, target):
    """Fill the disk on the first write into the checkpoint of step 4 (``target``: ``torch`` or ``safetensors``),
    keeping the run folder's hashes at that moment in ``snapshots``."""
    if target == "torch":
        def fake_open(path, mode="r", *args, **kwargs):
            if FAILING in str(path) and "w" in mode:
                snapshots.append(hashes(run_dir))
                return _FullDisk(path, room=1000)
            return open(path, mode, *args, **kwargs)

        monkeypatch.setattr(checkpoint_module, "open", fake_open, raising=False)
    else:
        real = safetensors.torch.save_file

        def fake_save_file(tensors, filename, metadata=None):
            if FAILING in str(filename):
                snapshots.append(hashes(run_dir))
                with open(filename, "wb") as fh:
                    fh.write(b"\0" * 100)
                raise safetensors.SafetensorError("Error while serializing: I/O error: No space left on device "
                                                  "(os error 28)")
            return real(tensors, filename, metadata=metadata)

        monkeypatch.setattr(safetensors.torch, "save_file", fake_save_file)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    root = tmp_path_factory.mktemp("uninterrupted")
    (root / "config.json").write_text(json.dumps(CONFIG))
    torch.set_num_threads(1)
    assert main(["train", "--config", str(root / "config.json"), "--out", str(root / "run")]) == 0
    return final_weights(root / "run")


@pytest.mark.parametrize("target", ["torch", "safetensors"])
def test_full_disk_is_one_line_keeps_every_file_and_resumes_exactly(tmp_path, capsys, monkeypatch, uninterrupted,
                                                                    target):
    run_dir = tmp_path / "run"
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    snapshots = []
    with monkeypatch.context() as patch:
        _arm(patch, run_dir, snapshots, target)
        assert main(["train", "--config", str(tmp_path / "config.json"), "--out", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"layerscale train: error: {run_dir / 'checkpoints' / FAILING}: No space left on device; "
                          f"checkpoint of step 4 not written, the earlier checkpoints are intact"), err
    assert len(snapshots) == 1 and "checkpoints/step_00000002/train_state.pt" in snapshots[0]
    assert hashes(run_dir) == snapshots[0]  # nothing lost, nothing half-written: every file as before the write
    assert not any(p.name.startswith(".") for p in (run_dir / "checkpoints").iterdir())  # no temporary left
    assert main(["train", "--resume", str(run_dir)]) == 0  # room again: resume
    resumed = final_weights(run_dir)
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), name


def test_other_errors_of_the_writer_are_not_dressed_as_a_full_disk(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("some other failure")

    monkeypatch.setattr(torch, "save", broken)
    with pytest.raises(RuntimeError, match="some other failure"):
        checkpoint_module.save_checkpoint(tmp_path, 1, {"w": torch.zeros(2)}, {"step": 1}, keep=1)
    assert list((tmp_path / "checkpoints").iterdir()) == []


class _FullDiskText:
    """``metrics.jsonl`` opened for appending, on a disk that fills up at the record of step 4."""

    def __init__(self, path, snapshots, run_dir):
        self._file, self._snapshots, self._run_dir = open(path, "a", encoding="utf-8"), snapshots, run_dir  # noqa: SIM115

    def write(self, text):
        if text.startswith('{"step": 4,'):
            self._snapshots.append(hashes(self._run_dir))
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._file.write(text)

    def __getattr__(self, name):
        return getattr(self._file, name)


def test_full_disk_at_a_metrics_record_is_one_line_and_resumes_exactly(tmp_path, capsys, monkeypatch,
                                                                       uninterrupted):
    run_dir = tmp_path / "run"
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    snapshots = []
    with monkeypatch.context() as patch:
        patch.setattr(metrics_module, "open", lambda path, *a, **k: _FullDiskText(path, snapshots, run_dir),
                      raising=False)
        assert main(["train", "--config", str(tmp_path / "config.json"), "--out", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"layerscale train: error: {run_dir / 'metrics.jsonl'}: No space left on device; the "
                          f"record of step 4 is not written and the run stopped"), err
    assert len(snapshots) == 1 and hashes(run_dir) == snapshots[0]
    assert main(["train", "--resume", str(run_dir)]) == 0
    resumed = final_weights(run_dir)
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), name


def test_a_file_written_whole_on_a_full_disk_is_named_and_left_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    target.write_text("the summary before")

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(type(target), "write_bytes", full)
    with pytest.raises(OSError, match="No space left on device") as caught:
        write_text_atomic(target, "a new summary")
    assert caught.value.filename == str(target) and caught.value.errno == errno.ENOSPC
    assert target.read_text() == "the summary before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
