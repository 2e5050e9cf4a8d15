"""Damaged run and model folders (a CLI bad-input sweep): each is one line naming the file and what was expected,
exit status 2, and nothing on disk changed (every entry under the test's folder: its kind, and the SHA-256 of each
regular file; a FIFO is looked at, never opened).

- ``report``: a ``config.yaml`` or ``metrics.jsonl`` of binary bytes (the line was Python's bare
  ``'utf-8' codec can't decode byte 0xff``, naming no file);
- ``report --out rx.html`` where ``rx_figures`` is a file or a FIFO (a raw ``[Errno 17] File exists``);
- a FIFO in place of ``metrics.jsonl``, ``config.yaml``, a checkpoint's ``model.safetensors`` or
  ``train_state.pt``, or a model folder's ``model.safetensors``: it was reported as "missing";
- ``"depth": "x"`` in a run's ``config.yaml`` or a model folder's ``config.json``: the line named the key but not
  the file.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from disk_state import snapshot
from layerscale.cli import main

pytest.importorskip("safetensors")
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")
pytest.importorskip("yaml")

CONFIG = {
    "model": {"name": "vit", "embed_dim": 16, "depth": 2, "num_heads": 2, "patch_size": 4},
    "data": {"name": "digits", "batch_size": 32},
    "optim": {"epochs": 1, "max_steps": 2, "warmup_steps": 1, "lr": 3e-3},
    "run": {"progress": "none", "log_every_steps": 1},
}
GARBAGE = b"\xff\xfe\x00\x01not text\x00\x80"


@pytest.fixture(scope="module")
def trained(train_with_cli):
    return train_with_cli(CONFIG, "run_folder_inputs")


@pytest.fixture
def workspace(tmp_path, trained):
    """``run`` (a copy of the trained run) and ``model`` (our model folder, written by ``prune``)."""
    shutil.copytree(trained, tmp_path / "run")
    assert main(["prune", str(tmp_path / "run"), "--blocks", "1", "--out", str(tmp_path / "model")]) == 0
    return tmp_path


def checkpoint(workspace: Path) -> Path:
    (step,) = (workspace / "run" / "checkpoints").iterdir()
    return step


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def garbage(path: Path) -> None:
    path.write_bytes(GARBAGE)


def depth_x(path: Path) -> None:
    """``depth: "x"`` in the YAML or JSON config ``path`` (its one depth key)."""
    text, count = re.subn(r'(^\s*depth: |"depth": )\d+', r'\1"x"', path.read_text(), flags=re.MULTILINE)
    assert count == 1
    path.write_text(text)


CASES = [
    # 1. binary bytes where the report reads text
    ("report config.yaml garbage", lambda w: garbage(w / "run/config.yaml"), "report",
     ["{w}/run", "--out", "{w}/r.html"],
     "{w}/run/config.yaml: not UTF-8 text (byte 0); expected the YAML config layerscale train writes"),
    ("report metrics.jsonl garbage", lambda w: garbage(w / "run/metrics.jsonl"), "report",
     ["{w}/run", "--out", "{w}/r.html"],
     "{w}/run/metrics.jsonl: not UTF-8 text (byte 0); expected the JSON lines"),
    ("report config.yaml empty", lambda w: (w / "run/config.yaml").write_bytes(b"# nothing\n"), "report",
     ["{w}/run", "--out", "{w}/r.html"],
     "{w}/run/config.yaml: holds no section; expected the YAML config layerscale train writes"),
    # 2. the figures folder beside the HTML is no folder
    ("report figures folder is a file", lambda w: (w / "rx_figures").write_bytes(b"mine"), "report",
     ["{w}/run", "--out", "{w}/rx.html"],
     "{w}/rx_figures: a file; expected a folder or nothing there"),
    ("report figures folder is a FIFO", lambda w: os.mkfifo(w / "rx_figures"), "report",
     ["{w}/run", "--out", "{w}/rx.html"],
     "{w}/rx_figures: a FIFO (named pipe); expected a folder or nothing there"),
    # 3. a FIFO is named as a FIFO, not as missing (and never opened: the command would hang)
    ("report metrics.jsonl FIFO", lambda w: fifo(w / "run/metrics.jsonl"), "report",
     ["{w}/run", "--out", "{w}/r.html"],
     "{w}/run/metrics.jsonl: is a FIFO (named pipe); expected the JSON lines"),
    ("report config.yaml FIFO", lambda w: fifo(w / "run/config.yaml"), "report",
     ["{w}/run", "--out", "{w}/r.html"],
     "{w}/run/config.yaml: is a FIFO (named pipe); expected the YAML config"),
    ("analyze checkpoint model.safetensors FIFO", lambda w: fifo(checkpoint(w) / "model.safetensors"), "analyze",
     ["{w}/run", "--out", "{w}/analysis"],
     "model.safetensors: is a FIFO (named pipe); expected a checkpoint file written by layerscale train"),
    ("prune checkpoint train_state.pt FIFO", lambda w: fifo(checkpoint(w) / "train_state.pt"), "prune",
     ["{w}/run", "--blocks", "1", "--out", "{w}/pruned"],
     "train_state.pt: is a FIFO (named pipe); expected a checkpoint file written by layerscale train"),
    ("analyze run config.yaml FIFO", lambda w: fifo(w / "run/config.yaml"), "analyze",
     ["{w}/run", "--out", "{w}/analysis"],
     "{w}/run/config.yaml: is a FIFO (named pipe)"),
    ("analyze model folder model.safetensors FIFO", lambda w: fifo(w / "model/model.safetensors"), "analyze",
     ["{w}/model", "--out", "{w}/analysis"],
     "{w}/model/model.safetensors: is a FIFO (named pipe); expected the model.safetensors save_pretrained writes"),
    # 4. a model config value of the wrong type names its file
    ("analyze run depth x", lambda w: depth_x(w / "run/config.yaml"), "analyze",
     ["{w}/run", "--out", "{w}/analysis"],
     "{w}/run/config.yaml: config key model.depth: expected int, got 'x'"),
    ("prune model folder depth x", lambda w: depth_x(w / "model/config.json"), "prune",
     ["{w}/model", "--blocks", "0", "--out", "{w}/pruned"],
     "{w}/model/config.json: depth must be a positive int, got 'x'"),
    ("grow model folder train.yaml depth x", lambda w: depth_x(w / "model/train.yaml"), "grow",
     ["{w}/model", "--insert", "1", "--where", "top", "--out", "{w}/grown"],
     "{w}/model/train.yaml: config key model.depth: expected int, got 'x'"),
]


@pytest.mark.parametrize("damage, command, args, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_damaged_folder_is_one_line_naming_the_file(workspace, capsys, damage, command, args, message):
    damage(workspace)
    before = snapshot(workspace)
    capsys.readouterr()
    assert main([command, *(a.replace("{w}", str(workspace)) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"layerscale {command}: error: "), err
    assert message.replace("{w}", str(workspace)) in err, err
    assert snapshot(workspace) == before
