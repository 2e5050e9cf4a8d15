"""``train --out`` into a place that cannot be written is one line naming the path and the reason, exit 2, and
nothing is written."""

import json

import pytest
from train_helpers import tiny_config

from layerscale.cli import main


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny_config()))
    return path


def _cases(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return {
        "under a regular file": (blocker / "run", "a-file is a file, not a folder"),
        "deeper under a regular file": (blocker / "x" / "run", "a-file is a file, not a folder"),
        "under /sys": ("/sys/layerscale-test-run", "folder /sys does not accept new files"),
        "under /proc": ("/proc/layerscale-test-run/sub", "folder /proc does not accept new files"),
    }


@pytest.mark.parametrize("case", ["under a regular file", "deeper under a regular file", "under /sys", "under /proc"])
def test_unwritable_out_is_one_line_exit_2(tmp_path, capsys, config_file, case):
    out, reason = _cases(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["train", "--config", str(config_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot write run directory {out}" in err[0] and reason in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.fixture
def immutable_dir(tmp_path):
    """An empty folder with the immutable attribute (``chattr +i``: even root cannot add files); skipped where
    the file system or the container does not allow setting it."""
    import shutil
    import subprocess

    folder = tmp_path / "immutable"
    folder.mkdir()
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)],
                                                        capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_existing_immutable_empty_run_directory_is_one_line(immutable_dir, capsys, config_file):
    assert main(["train", "--config", str(config_file), "--out", str(immutable_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot write run directory {immutable_dir}" in err[0], err
    assert "Operation not permitted" in err[0]


def test_convert_into_an_immutable_folder_is_one_line(immutable_dir, capsys, tmp_path):
    import torch

    from layerscale.checkpoint_io import save_safetensors_atomic

    src = save_safetensors_atomic({"blocks.0.attn.qkv.weight": torch.zeros(6, 2)}, tmp_path / "w.safetensors")
    assert main(["convert", str(src), str(immutable_dir / "out.safetensors")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not accept new files (Operation not permitted)" in err[0], err
    assert list(immutable_dir.iterdir()) == []
