"""User input that used to end in a traceback (issue 59, item 5; and prune's repeated blocks, item 8): each is one
line, status 2, and every file already on disk is unchanged (SHA-256 of every file under the test's folder).

- ``train --set model.depth=100000`` ran out of memory building 100,000 blocks on the meta device (minutes, 5 GB, a
  MemoryError traceback), ``--print-config`` too: depth and width now have stated limits
  (:data:`layerscale.models.validation.MAX_DEPTH`, :data:`~layerscale.models.validation.MAX_WIDTH`), checked before
  any module is built;
- a model ``img_size`` the dataset would be resized to past this machine's memory: refused before resizing;
- ``analyze --bootstrap 100000000`` tried to allocate the (replicates, examples) counts (tens of GB), and so did
  ``prune --by ... --bootstrap 100000000``: at most 10,000;
- ``prune --device cuda:7`` without that GPU: the same one-line refusal as ``analyze``, before anything is read; a
  device name with an ESC and a newline is escaped in that line;
- ``grow --insert 100000000 --where top``: past the depth limit, refused before the first copy;
- ``prune --blocks 0,0``: refused (a block named twice is a typo, not a request for one block).
"""

from __future__ import annotations

import hashlib
import shutil

import pytest
import torch

from layerscale.cli import main
from layerscale.models.registry import create_model
from layerscale.models.validation import MAX_DEPTH, MAX_WIDTH

pytest.importorskip("safetensors")
pytest.importorskip("sklearn")

CONFIG = {
    "model": {"name": "vit", "embed_dim": 16, "depth": 3, "num_heads": 2, "patch_size": 4},
    "data": {"name": "digits", "batch_size": 32},
    "optim": {"epochs": 1, "max_steps": 2, "warmup_steps": 1, "lr": 3e-3},
    "run": {"progress": "none", "log_every_steps": 1},
}


def hashes(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(train_with_cli):
    return train_with_cli(CONFIG, "user_input_bounds")


@pytest.fixture
def workspace(tmp_path, trained):
    """A copy of the trained run (``run``) and its config file (``config.json``), in a folder of its own."""
    shutil.copytree(trained, tmp_path / "run")
    shutil.copy(trained.parent / "config.json", tmp_path / "config.json")
    return tmp_path


CASES = [
    ("train depth 100000", "train", ["--config", "{w}/config.json", "--set", "model.depth=100000", "--out", "{w}/new"],
     f"depth must be at most {MAX_DEPTH} (this library's limit), got 100000"),
    ("print-config depth 100000", "train", ["--config", "{w}/config.json", "--set", "model.depth=100000",
                                            "--print-config"], "config key model: depth must be at most 1024"),
    ("train width", "train", ["--config", "{w}/config.json", "--set", "model.embed_dim=100000000", "--out", "{w}/new"],
     f"embed_dim must be at most {MAX_WIDTH} (this library's limit), got 100000000"),
    ("resume at depth 100000", "train", ["--resume", "{w}/run", "--set", "model.depth=100000"],
     "depth must be at most 1024"),
    ("train img_size past memory", "train", ["--config", "{w}/config.json", "--set", "model.img_size=1000000",
                                             "--out", "{w}/new"],
     "img_size 1000000: resizing the 1,797 images of dataset 'digits' to 1000000x1000000 needs"),
    ("analyze bootstrap 1e8", "analyze", ["{w}/run", "--bootstrap", "100000000", "--out", "{w}/analysis"],
     "--bootstrap 100000000: expected an int in [2, 10000]"),
    ("prune bootstrap 1e8", "prune", ["{w}/run", "--remove", "1", "--by", "gromov", "--bootstrap", "100000000",
                                      "--out", "{w}/pruned"],
     "--bootstrap 100000000: expected an int in [2, 10000]"),
    ("prune on a missing GPU", "prune", ["{w}/run", "--blocks", "1", "--device", "cuda:7", "--out", "{w}/pruned"],
     "device 'cuda:7': " + ("this machine has" if torch.cuda.is_available() else "no CUDA GPU is available")),
    ("prune device with ESC and newline", "prune", ["{w}/run", "--blocks", "1", "--device", "cu\x1b[2J\nda",
                                                    "--out", "{w}/pruned"],
     r"device 'cu\x1b[2J\nda' is not a torch device"),
    ("grow past the depth limit", "grow", ["{w}/run", "--insert", "100000000", "--where", "top", "--out",
                                            "{w}/grown"],
     "insert=100000000: 3 + 100000000 blocks is more than 1024, the most blocks a model may have"),
    ("analyze device with ESC and newline", "analyze", ["{w}/run", "--device", "cu\x1b[2J\nda", "--out",
                                                        "{w}/analysis"],
     r"device 'cu\x1b[2J\nda' is not a torch device"),
    ("train device with ESC and newline", "train", ["--resume", "{w}/run", "--set", "run.device=cu\x1b[2J\nda"],
     r"config key run.device: 'cu\x1b[2J\nda' is not allowed"),
    ("prune a block twice", "prune", ["{w}/run", "--blocks", "0,0", "--out", "{w}/pruned"],
     "--blocks '0,0': block 0 is named twice; expected distinct block indices"),
]


@pytest.mark.parametrize("command, args, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_user_input_is_one_line_status_2_and_no_file_changes(workspace, capsys, command, args, message):
    before = hashes(workspace)
    capsys.readouterr()
    assert main([command, *(a.replace("{w}", str(workspace)) for a in args)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"layerscale {command}: error: "), captured.err
    assert "\x1b" not in captured.err
    assert message in captured.err, captured.err
    assert hashes(workspace) == before
    assert sorted(p.name for p in workspace.iterdir()) == ["config.json", "run"]


@pytest.mark.parametrize("name, args", [("vit", dict(depth=MAX_DEPTH + 1)),
                                        ("cait", dict(depth_token_only=MAX_DEPTH + 1)),
                                        ("gpt_nano", dict(embed_dim=MAX_WIDTH * 2, num_heads=2))])
def test_the_model_limits_hold_before_any_module_is_built(name, args):
    with torch.device("meta"), pytest.raises(ValueError, match="must be at most"):
        create_model(name, **args)


def test_the_limits_themselves_are_allowed():
    with torch.device("meta"):
        assert create_model("vit", depth=MAX_DEPTH, embed_dim=8, num_heads=2).depth == MAX_DEPTH
        assert create_model("vit", depth=1, embed_dim=MAX_WIDTH, num_heads=2).embed_dim == MAX_WIDTH
