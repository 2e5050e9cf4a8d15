"""``layerscale convert A B | head -1``: the reader closes the pipe before the command has printed everything. The
command still does its work (B written, exit status 0) and says nothing of the pipe; it stopped with "error: Broken
pipe", status 2 and no B."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from layerscale import create_model

SRC = Path(__file__).resolve().parents[2] / "src"


def _closed_pipe():
    """The write end of a pipe whose reader is gone: the first write meets EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_a_command_whose_reader_left_still_writes_its_file(tmp_path):
    pytest.importorskip("safetensors")
    import torch

    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=16, depth=2,
                         num_heads=2)
    torch.save(model.state_dict(), tmp_path / "vit.pth")
    stdout = _closed_pipe()
    try:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(SRC))
        done = subprocess.run([sys.executable, "-m", "layerscale", "convert", "vit.pth", "vit.safetensors"],
                              cwd=tmp_path, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=180)
    finally:
        os.close(stdout)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "vit.safetensors").is_file()
