"""A tiny training configuration (ViT, width 32, depth 2, scikit-learn digits) and subprocess helpers."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from layerscale.checkpoint_io import load_state_dict_file

REPO = Path(__file__).resolve().parents[2]

TINY = {
    "model": {"name": "vit", "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 2},
    "data": {"name": "digits", "batch_size": 32},
    "optim": {"epochs": 1, "max_steps": 12, "warmup_steps": 3, "lr": 3e-3},
    "run": {"progress": "none", "log_every_steps": 4},
}


def tiny_config(**sections) -> dict:
    """``TINY`` with each given section's keys updated, e.g. ``tiny_config(run={"seed": 1})``."""
    config = copy.deepcopy(TINY)
    for name, values in sections.items():
        config.setdefault(name, {}).update(values)
    return config


def single_thread_env() -> dict:
    """The environment for child processes: one thread each (as the tests' own process), the source tree
    importable."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return env


def layerscale_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "layerscale", *args]


def run_command(command: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``command`` in its own session; on timeout kill the whole session (torchrun's workers included)."""
    process = subprocess.Popen(command, cwd=cwd, env=single_thread_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def run_cli(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return run_command(layerscale_command(*args), cwd, timeout)


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    checkpoints = sorted((Path(run_dir) / "checkpoints").glob("step_*"))
    assert checkpoints, f"no checkpoint in {run_dir}"
    return load_state_dict_file(checkpoints[-1] / "model.safetensors")


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes (to show that a failed start changed nothing)."""
    directory = Path(directory)
    if not directory.exists():
        return {}
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def kill_training_when(config_file, run_dir, ready, what: str) -> None:
    """Start ``layerscale train --config CONFIG_FILE --out RUN_DIR`` and SIGKILL it as soon as ``ready()`` holds
    (``what``: the awaited event, for the failure messages; at most 120 s)."""
    process = subprocess.Popen(layerscale_command("train", "--config", str(config_file), "--out", str(run_dir)),
                               env=single_thread_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not ready():
            assert process.poll() is None, f"training ended before {what}: {process.stderr.read()}"
            assert time.monotonic() < deadline, f"no {what} within 120 s"
            time.sleep(0.005)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
