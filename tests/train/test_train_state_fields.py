"""A crafted ``train_state.pt`` (issue 30, item 2): every field is checked before a resumed run touches a file.

Each case edits one field of a real checkpoint's training state (read and rewritten with ``torch.load`` /
``torch.save``, so the file itself is well formed) and resumes with a larger step budget, so that a position past
the end of the epoch would loop forever and a negative step would train. The command must refuse with one line,
status 2, and leave every file of the run directory byte for byte as it was (``metrics.jsonl`` not cut back,
``config.yaml`` not rewritten).
"""

import re
import shutil

import pytest
import torch
from train_helpers import snapshot

from layerscale.cli import main
from layerscale.train import run

STATE = "checkpoints/step_00000002/train_state.pt"


def _set(state, dotted, value):
    *parents, last = dotted.split(".")
    for name in parents:
        state = state[name]
    state[last] = value


CASES = [
    ("batch_in_epoch", 10**6, r"field batch_in_epoch is 1000000; allowed: an int in \[0, 44\)"),
    ("batch_in_epoch", 44, r"field batch_in_epoch is 44; allowed: an int in \[0, 44\)"),
    ("step", -1000, r"field step is -1000; allowed: an int >= 0"),
    ("step", float("inf"), r"field step is inf; allowed: an int >= 0"),
    ("step", True, r"field step is True; allowed: an int >= 0"),
    ("epoch", "1", r"field epoch is '1'; allowed: an int >= 0"),
    ("elapsed", float("nan"), r"field elapsed is nan; allowed: a finite number of seconds >= 0"),
    ("early_stopping", "x", r"field early_stopping is 'x'; allowed: a mapping with str keys"),
    ("early_stopping.best", "q", r"field early_stopping\.best is 'q'; allowed: a finite number or null"),
    ("early_stopping.evals_without_improvement", -1, r"evals_without_improvement is -1; allowed: an int >= 0"),
    ("last_eval", [1], r"field last_eval is \[1\]; allowed: a mapping with str keys"),
    ("rng", 5, r"field rng is 5; allowed: a non-empty list"),
    ("rng", [{"cpu": torch.zeros(3)}], r"field rng\[0\] is .*allowed: a non-empty list"),
    ("optimizer", [], r"field optimizer is \[\]; allowed: an optimizer state dict"),
    ("scheduler", {}, r"field scheduler is \{\}; allowed: a scheduler state dict with last_epoch"),
    ("model", 7, r"field model is 7; allowed: a model name \(str\)"),
    ("callbacks", {1: 2}, r"field callbacks is \{1: 2\}; allowed: a mapping with str keys"),
]


@pytest.mark.parametrize("field, value, message", CASES, ids=[f"{c[0]}={c[1]!r}"[:40] for c in CASES])
def test_crafted_training_state_is_refused_before_any_file_changes(tmp_path, capsys, finished_run, field, value,
                                                                    message):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    state = torch.load(run_dir / STATE, weights_only=True)
    _set(state, field, value)
    torch.save(state, run_dir / STATE)
    before = snapshot(run_dir)
    assert main(["train", "--resume", str(run_dir), "--set", "optim.max_steps=6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("layerscale train: error: ")
    assert re.search(message, err), err
    assert snapshot(run_dir) == before


def test_missing_field_is_refused(tmp_path, capsys, finished_run):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    state = torch.load(run_dir / STATE, weights_only=True)
    del state["batch_in_epoch"]
    torch.save(state, run_dir / STATE)
    before = snapshot(run_dir)
    assert main(["train", "--resume", str(run_dir)]) == 2
    assert "training state without field(s) batch_in_epoch" in capsys.readouterr().err
    assert snapshot(run_dir) == before


def test_untouched_state_still_resumes(tmp_path, finished_run):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    assert run(resume=run_dir, overrides=["optim.max_steps=3"]).step == 3
