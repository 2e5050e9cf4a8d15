"""A crafted ``train_state.pt`` whose optimizer tensors overlap in memory: ``torch.save`` keeps strides and shared
storages, and ``torch.load(weights_only=True)`` rebuilds them, so a moment of the right shape can be one float seen
16 times (stride 0), or two moments (or the step counts of two parameters) one tensor. Such a state passes every
shape, dtype and value check, and then either fails at the first step with torch's "more than one element of the
written-to tensor refers to a single memory location" (after the run's records were cut back to the checkpoint) or
trains on silently wrong moments. Each is refused in one line, status 2, every file unchanged."""

import re
import shutil

import pytest
import torch

from layerscale.cli import main
from test_train_state_fit import STATE, WEIGHT, hashes

BIAS = "patch_embed.proj.bias"


def _zero_stride(s):
    s["optimizer"]["state"][WEIGHT]["exp_avg"] = torch.zeros(1).expand(32, 1, 2, 2)


def _moments_one_tensor(s):
    entry = s["optimizer"]["state"][WEIGHT]
    entry["exp_avg_sq"] = entry["exp_avg"] = entry["exp_avg"].abs()


def _steps_one_tensor(s):
    s["optimizer"]["state"][BIAS]["step"] = s["optimizer"]["state"][WEIGHT]["step"]


def _moment_a_view_of_another(s):
    whole = torch.zeros(2 * 128)
    s["optimizer"]["state"][WEIGHT]["exp_avg"] = whole[:128].view(32, 1, 2, 2)
    s["optimizer"]["state"][WEIGHT]["exp_avg_sq"] = whole[64:192].view(32, 1, 2, 2)


CASES = [
    ("exp_avg of stride 0", _zero_stride,
     r"optimizer\.state\['patch_embed\.proj\.weight'\]\.exp_avg is a torch\.float32 tensor of shape \(32, 1, 2, 2\) "
     r"and strides \(0, 0, 0, 0\); expected a contiguous tensor, one storage of its own"),
    ("exp_avg and exp_avg_sq one tensor", _moments_one_tensor,
     r"\['patch_embed\.proj\.weight'\]\.exp_avg_sq shares memory with optimizer\.state\['patch_embed\.proj\.weight'\]"
     r"\.exp_avg; expected a tensor of its own"),
    ("two parameters' steps one tensor", _steps_one_tensor, r"\.step shares memory with optimizer\.state\["),
    ("moments overlapping views of one storage", _moment_a_view_of_another, r"exp_avg_sq shares memory with"),
]


@pytest.mark.parametrize("edit, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_optimizer_tensors_sharing_memory_are_refused_before_any_file_changes(tmp_path, capsys, finished_run, edit,
                                                                            message):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    state = torch.load(run_dir / STATE, weights_only=True)
    edit(state)
    torch.save(state, run_dir / STATE)
    before = hashes(run_dir)
    assert main(["train", "--resume", str(run_dir), "--set", "optim.max_steps=4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("layerscale train: error: "), err
    assert re.search(message, err), err
    assert hashes(run_dir) == before
