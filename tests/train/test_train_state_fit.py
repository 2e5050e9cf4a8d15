"""A crafted ``train_state.pt`` that does not fit the run resuming it (issue 59, item 3): checked field by field
against the model, the optimizer and the scheduler before any file is touched.

Each case edits one field of a real checkpoint's training state (rewritten with ``torch.save``, so the file is well
formed and passes the type checks of :mod:`layerscale.train.state.train_state`) and resumes with a larger step budget.
Before these checks an ``exp_avg`` of another shape ended in an INTERNAL ASSERT and a segfault of the fused AdamW kernel
after ``metrics.jsonl`` was cut back, a bad diagnostics alert entry was refused only after the same cut, and the other
cases resumed with status 0. Each must now be one line, status 2, every file's SHA-256 unchanged.
"""

import hashlib
import re
import shutil

import pytest
import torch

from layerscale.cli import main

STATE = "checkpoints/step_00000002/train_state.pt"
WEIGHT = "patch_embed.proj.weight"


def hashes(directory):
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _moment(key, value):
    return lambda s: s["optimizer"]["state"][WEIGHT].__setitem__(key, value)


def _group(key, value, index=0):
    return lambda s: s["optimizer"]["param_groups"][index].__setitem__(key, value)


def _permute(s):
    for key in ("params", "param_names"):
        names = s["optimizer"]["param_groups"][0][key]
        names[0], names[1] = names[1], names[0]


# A crafted state whose optimizer tensors overlap in memory: ``torch.save`` keeps strides and shared storages and
# ``torch.load(weights_only=True)`` rebuilds them, so a moment of the right shape can be one float seen 16 times
# (stride 0: a crash of the fused AdamW kernel at the first step) or two moments, or the step counts of two
# parameters, one tensor (silently wrong updates). Each passes the shape, dtype and value checks.
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
    ("exp_avg of another shape", _moment("exp_avg", torch.zeros(3)),
     r"optimizer\.state\['patch_embed\.proj\.weight'\]\.exp_avg is a torch\.float32 tensor of shape \(3,\); "
     r"expected a finite float tensor of shape \(32, 1, 2, 2\)"),
    ("exp_avg_sq negative", _moment("exp_avg_sq", -torch.ones(32, 1, 2, 2)),
     r"exp_avg_sq holds negative values; expected a finite non-negative float tensor"),
    ("exp_avg NaN", _moment("exp_avg", torch.full((32, 1, 2, 2), float("nan"))), r"exp_avg holds non-finite values"),
    ("exp_avg int64", _moment("exp_avg", torch.zeros(32, 1, 2, 2, dtype=torch.int64)),
     r"exp_avg is a torch\.int64 tensor"),
    ("moment step past the run's", _moment("step", torch.tensor(1e18)),
     r"\.step is tensor\(1\.0000e\+18\); expected a 0-dim float tensor holding a whole number in \[0, 2\]"),
    ("moment step an int", _moment("step", 2), r"\.step is 2; expected a 0-dim float tensor"),
    ("extra moment", _moment("junk", torch.zeros(1)), r"expected an AdamW parameter state with keys"),
    ("state of an unknown parameter", lambda s: s["optimizer"]["state"].__setitem__(
        "blocks.9.\n\x1b[2J", s["optimizer"]["state"][WEIGHT]),
     r"optimizer\.state key is 'blocks\.9\.\\n\\x1b\[2J'; expected the name of one of this run's trainable"),
    ("groups permuted", _permute, r"optimizer\.param_groups\[0\]\.params is .*; expected this run's 10 parameter "
                                  r"names of group 0, in order"),
    ("one group", lambda s: s["optimizer"]["param_groups"].pop(),
     r"optimizer\.param_groups holds 1 groups; expected 2"),
    ("betas", _group("betas", (0.9, 7.0)), r"param_groups\[0\]\.betas is \(0\.9, 7\.0\); expected two numbers in"),
    ("lr NaN", _group("lr", float("nan")), r"param_groups\[0\]\.lr is nan; expected a finite number >= 0"),
    ("amsgrad switched on", _group("amsgrad", True), r"param_groups\[0\]\.amsgrad is True; expected False"),
    ("capturable switched on", _group("capturable", True), r"param_groups\[0\]\.capturable is True; expected False"),
    ("unknown group key", _group("zzz", 1), r"param_groups\[0\] key is 'zzz'; expected one of this optimizer's"),
    ("scheduler.last_epoch 10**18", lambda s: s["scheduler"].__setitem__("last_epoch", 10**18),
     r"scheduler\.last_epoch is 1000000000000000000; expected 2, the field step"),
    ("scheduler attribute", lambda s: s["scheduler"].__setitem__("optimizer", {}),
     r"scheduler key is 'optimizer'; expected one of this scheduler's keys"),
    ("scheduler base_lrs", lambda s: s["scheduler"].__setitem__("base_lrs", [1.0]),
     r"scheduler\.base_lrs is \[1\.0\]; expected a list of 2 finite numbers"),
    ("total_steps 0", lambda s: s.__setitem__("total_steps", 0), r"field total_steps is 0; expected an int >= 2"),
    ("world_size 8", lambda s: s.__setitem__("world_size", 8),
     r"field world_size is 8; expected 1, the number of processes whose RNG states the field rng holds"),
    ("model_args.depth", lambda s: s["model_args"].__setitem__("depth", 12),
     r"field model_args\.depth is 12; expected 2, as this run builds the model"),
    ("model_args extra key", lambda s: s["model_args"].__setitem__("ls_init", 1.0),
     r"field model_args\.ls_init is 1\.0; expected '<absent>'"),
    ("alerts entry", lambda s: s["callbacks"]["DiagnosticsCallback"]["alerts"]["active"].append([1]),
     r"field callbacks\.DiagnosticsCallback: alerts\.active\[0\] is \[1\]; expected \[block, branch, one of"),
    ("alerts scale_init", lambda s: s["callbacks"]["DiagnosticsCallback"]["alerts"]["scale_init"][0].__setitem__(
        2, float("inf")), r"alerts\.scale_init\[0\] is .*inf\]; expected \[block, branch, finite number >= 0\]"),
    ("model_args.depth a tensor", lambda s: s["model_args"].__setitem__("depth", torch.zeros(2)),
     r"field model_args\.depth is tensor\(\[0\., 0\.\]\); expected 2"),
    ("eps past float's range", _group("eps", 10**400), r"param_groups\[0\]\.eps is 1000.*; expected a finite number"),
    ("elapsed past float's range", lambda s: s.__setitem__("elapsed", 10**400),
     r"field elapsed is 1000.*; allowed: a finite number of seconds >= 0"),
    ("exp_avg sparse", _moment("exp_avg", torch.zeros(32, 1, 2, 2).to_sparse()),
     r"exp_avg is a sparse_coo torch\.float32 tensor of shape \(32, 1, 2, 2\)"),
    ("exp_avg on meta", _moment("exp_avg", torch.zeros(32, 1, 2, 2, device="meta")),
     r"exp_avg is a meta torch\.float32 tensor"),
    ("tensor in last_eval", lambda s: s["last_eval"].__setitem__("loss", torch.zeros(2)),
     r"field last_eval\.loss is tensor\(\[0\., 0\.\]\); allowed: a number, a string, a bool or null"),
    ("diagnostics state", lambda s: s["callbacks"].__setitem__("DiagnosticsCallback", 5),
     r"callbacks\.DiagnosticsCallback: state is 5; expected a mapping"),
]


@pytest.mark.parametrize("edit, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_state_that_does_not_fit_the_run_is_refused_before_any_file_changes(tmp_path, capsys, finished_run, edit,
                                                                             message):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    state = torch.load(run_dir / STATE, weights_only=True)
    edit(state)
    torch.save(state, run_dir / STATE)
    before = hashes(run_dir)
    assert main(["train", "--resume", str(run_dir), "--set", "optim.max_steps=6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("layerscale train: error: "), err
    assert "\x1b" not in err
    assert re.search(message, err), err
    assert hashes(run_dir) == before


def test_the_state_as_written_still_fits_and_resumes(tmp_path, finished_run):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    assert main(["train", "--resume", str(run_dir), "--set", "optim.max_steps=3"]) == 0
    assert (run_dir / "checkpoints" / "step_00000003").is_dir()
