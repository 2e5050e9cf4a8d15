"""Bad inputs to param_groups and WarmupCosineSchedule are refused in one line naming the argument."""
import math

import pytest
import torch

from layerscale import create_model, param_groups
from layerscale.train import WarmupCosineSchedule


def _one_line(exc_info, *words):
    text = str(exc_info.value)
    assert "\n" not in text
    for word in words:
        assert word in text


@pytest.mark.parametrize("wd", [float("nan"), float("inf"), -float("inf"), -0.1])
def test_param_groups_refuses_non_finite_or_negative_weight_decay(wd):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError) as exc:
        param_groups(model, wd)
    _one_line(exc, "weight_decay", "finite")


@pytest.mark.parametrize("wd", ["0.1", None, True])
def test_param_groups_refuses_non_number_weight_decay(wd):
    with pytest.raises(TypeError) as exc:
        param_groups(torch.nn.Linear(2, 2), wd)
    _one_line(exc, "weight_decay")


def test_param_groups_good_weight_decay_still_trains_finite():
    model = create_model("cait", img_size=8, patch_size=4, embed_dim=16, depth=1, num_heads=2)
    opt = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-3)
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters())


def _opt():
    return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-2)


@pytest.mark.parametrize("min_lr", [-1e-3, float("nan"), float("inf")])
def test_schedule_refuses_negative_or_non_finite_min_lr(min_lr):
    with pytest.raises(ValueError) as exc:
        WarmupCosineSchedule(_opt(), 0, 4, min_lr=min_lr)
    _one_line(exc, "min_lr")


BAD_COUNTS = [({"warmup_steps": 2.7}, "warmup_steps"), ({"warmup_steps": True}, "warmup_steps"),
              ({"total_steps": 4.0}, "total_steps"), ({"total_steps": "4"}, "total_steps"), ({"min_lr": "0"}, "min_lr")]


@pytest.mark.parametrize("kwargs,name", BAD_COUNTS)
def test_schedule_refuses_non_integer_step_counts(kwargs, name):
    args = {"warmup_steps": 1, "total_steps": 4, "min_lr": 0.0} | kwargs
    with pytest.raises(TypeError) as exc:
        WarmupCosineSchedule(_opt(), **args)
    _one_line(exc, name)


@pytest.mark.parametrize("kwargs,name", [({"warmup_steps": -1}, "warmup_steps"), ({"total_steps": 0}, "total_steps")])
def test_schedule_refuses_out_of_range_counts(kwargs, name):
    with pytest.raises(ValueError) as exc:
        WarmupCosineSchedule(_opt(), **({"warmup_steps": 1, "total_steps": 4} | kwargs))
    _one_line(exc, name)


def test_schedule_good_inputs_end_at_min_lr():
    opt = _opt()
    sched = WarmupCosineSchedule(opt, 0, 4, min_lr=1e-3)
    for _ in range(4):
        opt.step()
        sched.step()
    assert math.isclose(opt.param_groups[0]["lr"], 1e-3)
