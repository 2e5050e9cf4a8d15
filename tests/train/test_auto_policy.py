"""``run.precision: auto`` and ``run.compile: auto``: fixed, deterministic choices by device and configuration."""

import pytest
import torch

from layerscale.train.loop import auto_policy
from layerscale.train.loop.auto_policy import (CPU_BF16_MIN_WIDTH, CUDA_BF16_MIN_WIDTH, CUDA_COMPILE_MIN_STEPS,
                                          choose_compile, choose_precision, model_width)
from layerscale.train.loop.budget import steps_per_epoch
from layerscale.train.config.schema import TrainConfig
from layerscale.train.runner import run

from train_helpers import tiny_config

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.mark.parametrize("native", [False, True], ids=["emulated_bf16", "native_bf16"])
def test_cpu_precision_rule_by_width(monkeypatch, native):
    monkeypatch.setattr(auto_policy, "cpu_has_native_bf16", lambda: native)
    below, at, above = CPU_BF16_MIN_WIDTH - 64, CPU_BF16_MIN_WIDTH, 2 * CPU_BF16_MIN_WIDTH
    assert choose_precision("auto", CPU, below)[0] == "fp32"
    assert choose_precision("auto", CPU, at)[0] == ("bf16" if native else "fp32")
    assert choose_precision("auto", CPU, above)[0] == ("bf16" if native else "fp32")
    assert choose_precision("auto", CPU, None)[0] == "fp32"


@pytest.mark.parametrize("supported", [False, True])
def test_cuda_precision_rule_by_width(monkeypatch, supported):
    """bf16 only from the width where it measured faster on a GPU, and only where the device supports it."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: supported)
    assert choose_precision("auto", CUDA, 64)[0] == "fp32"
    assert choose_precision("auto", CUDA, CUDA_BF16_MIN_WIDTH - 128)[0] == "fp32"
    assert choose_precision("auto", CUDA, CUDA_BF16_MIN_WIDTH)[0] == ("bf16" if supported else "fp32")
    assert choose_precision("auto", CUDA, 2 * CUDA_BF16_MIN_WIDTH)[0] == ("bf16" if supported else "fp32")
    assert choose_precision("auto", CUDA, None)[0] == "fp32"


def test_compile_rule_by_device_and_planned_steps():
    """auto compiles only on CUDA and only a run long enough to earn back the compilation."""
    assert choose_compile("auto", CUDA, CUDA_COMPILE_MIN_STEPS)[0] is True
    assert choose_compile("auto", CUDA, CUDA_COMPILE_MIN_STEPS - 1)[0] is False
    assert choose_compile("auto", CUDA, None)[0] is False
    assert choose_compile("auto", CPU, 10 * CUDA_COMPILE_MIN_STEPS)[0] is False
    assert choose_compile("auto", torch.device("meta"), 10 * CUDA_COMPILE_MIN_STEPS)[0] is False


def test_steps_per_epoch_matches_the_sampler_and_batches():
    assert steps_per_epoch(1000, 64) == 15
    assert steps_per_epoch(1000, 64, world_size=2) == 15  # 500 samples, batches of 32 per process
    assert steps_per_epoch(1001, 64, world_size=4) == 15  # 250 each, batches of 16
    assert steps_per_epoch(10, 64) == 0


def test_explicit_choices_are_kept():
    for device in (CPU, CUDA):
        assert choose_precision("fp32", device, 4096) == ("fp32", "as configured")
        assert choose_precision("bf16", device, 16) == ("bf16", "as configured")
        assert choose_compile("regional", device) == (True, "as configured")
        assert choose_compile("off", device) == (False, "as configured")


@pytest.mark.parametrize("device", [CPU, CUDA], ids=["cpu", "cuda"])
def test_auto_choices_are_deterministic(device):
    """The same device and configuration give the same answer every time (a resumed run chooses alike)."""
    for width in (32, 64, 192, 384, None):
        assert len({choose_precision("auto", device, width) for _ in range(3)}) == 1
    for steps in (100, 100_000, None):
        assert len({choose_compile("auto", device, steps) for _ in range(3)}) == 1


def test_model_width_reads_embed_dim():
    assert model_width(torch.nn.Linear(2, 2)) is None
    module = torch.nn.Module()
    module.embed_dim = 96
    assert model_width(module) == 96


def test_config_accepts_auto_and_refuses_other_values():
    config = TrainConfig.from_dict(tiny_config(run={"precision": "auto", "compile": "auto"}))
    assert (config.run.precision, config.run.compile) == ("auto", "auto")
    with pytest.raises(ValueError, match="run.compile"):
        TrainConfig.from_dict(tiny_config(run={"compile": "always"}))
    with pytest.raises(ValueError, match="run.precision"):
        TrainConfig.from_dict(tiny_config(run={"precision": "fp16"}))


def test_trainer_reports_its_choice(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(auto_policy, "cpu_has_native_bf16", lambda: True)
    run(tiny_config(optim={"max_steps": 2}, run={"precision": "auto", "compile": "auto", "progress": "log", "device": "cpu"}),
        out=tmp_path / "run")
    out = capsys.readouterr().out
    assert "precision: fp32 (auto: width 32 < 192" in out  # the tiny model is 32 wide
    assert "compile: off (auto: regional compilation measured slower" in out
