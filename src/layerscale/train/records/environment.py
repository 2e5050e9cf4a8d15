"""What a run's numbers depend on besides its config: the software and the processor (``summary.json``'s
``environment``).

A run is deterministic on one machine (``run.deterministic``), but not across machines: another CPU or build of the
math libraries rounds differently, and a run drifts from its twin within a few hundred steps (measured 2026-12-01:
a Fashion-MNIST ViT retrained from its recorded config agreed to 1e-7 at step 10 and ended 0.14 points of test
accuracy away). Recording the environment says which runs can be expected to agree bitwise.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import torch

__all__ = ["run_environment"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_environment(device: torch.device | str) -> dict:
    """``{python, torch, platform, cpu, cpu_capability, threads, device[, cuda, gpu]}`` of this process."""
    env = {"python": platform.python_version(), "torch": torch.__version__, "platform": sys.platform,
           "machine": platform.machine(), "cpu": _cpu_model(),
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
           "device": str(device)}
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        env.update(cuda=torch.version.cuda, gpu=torch.cuda.get_device_name(torch.device(device)))
    return env
