"""Tensor names from a file in error messages (issue 30, item 4): a newline cannot forge a second error line, an ANSI
escape never reaches the terminal, and a 200 KB name is cut — in every command that names tensors (fold, convert,
resume), through one helper (:mod:`layerscale.messages`)."""

import pytest
import torch
from safetensors.torch import load_file, save_file

from layerscale.cli import main
from layerscale.messages import NAME_LIMIT, one_line, shown_name, shown_names, shown_value
from layerscale.models import create_model
from layerscale.train import run

FORGED = "blocks.0.x\nlayerscale fold: error: forged\x1b[31m.gamma"
LONG = "blocks.0." + "x" * 200_000 + ".gamma"


def _state():
    model = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=16, depth=1,
                         num_heads=2, residual="layerscale")
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def _assert_one_safe_line(err: str, command: str) -> None:
    assert err.count("\n") == 1 and err.startswith(f"layerscale {command}: error: "), err[:500]
    assert "\x1b" not in err and len(err) < 1000, err[:500]


@pytest.mark.parametrize("name", [FORGED, LONG], ids=["newline-and-ansi", "200KB"])
@pytest.mark.parametrize("command", [["fold"], ["convert", "--to", "timm_vit"], ["convert", "--from", "timm_vit"]],
                         ids=["fold", "convert-to", "convert-from"])
def test_hostile_tensor_name_is_escaped_and_cut(tmp_path, capsys, name, command):
    state = _state()
    state[name] = torch.ones(16)
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    save_file(state, str(src))
    assert main([command[0], str(src), str(dst), *command[1:]]) == 2
    err = capsys.readouterr().err
    _assert_one_safe_line(err, command[0])
    assert shown_name(name) in err
    assert not dst.exists()


def test_hostile_names_in_a_checkpoint_are_escaped_on_resume(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run({"model": {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, "patch_size": 2},
         "data": {"name": "digits", "batch_size": 32}, "optim": {"max_steps": 1}, "run": {"progress": "none"}},
        out=run_dir)
    path = next(run_dir.glob("checkpoints/step_*")) / "model.safetensors"
    weights = load_file(str(path))
    weights[FORGED], weights[LONG] = torch.ones(1), torch.ones(1)
    save_file(weights, str(path))
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    _assert_one_safe_line(err, "train")
    assert f"unexpected [{shown_name(FORGED)}, {shown_name(LONG)}]" in err
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_the_helpers_escape_then_cut():
    assert shown_name("a\nb\x1b[0m\u2028c") == "a\\nb\\x1b[0m\\u2028c"
    assert shown_name("x" * 500) == "x" * NAME_LIMIT + "...(500 characters)"
    assert shown_name("\n" * 500).endswith("...(500 characters)") and len(shown_name("\n" * 500)) < 2 * NAME_LIMIT
    assert shown_names(["b\n", "a"], 1) == "[a] (+1 more)"
    assert one_line("first\nsecond") == "first\\nsecond"
    bomb = [1]
    for _ in range(30):
        bomb = [bomb] * 9  # 9**30 leaves if expanded
    assert len(shown_value(bomb)) < 2 * NAME_LIMIT
    assert shown_value(int("9" * 400)).count("9") < 60
