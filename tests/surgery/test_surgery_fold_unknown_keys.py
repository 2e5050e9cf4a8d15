"""``layerscale fold`` and a tensor that no model with our keys has (issue 59, item 8): before, it was copied into
the folded file as it was — a crafted name ``"x\\n\\x1b[2J"`` included — and the fold said it loads into the model
built without scales, which it then did not (strictly). Now: one line naming the tensors (escaped), status 2, no
file written or changed."""

from __future__ import annotations

import hashlib

import pytest
import torch

from layerscale.checkpoint_io import read_state_dict_file, save_safetensors_atomic
from layerscale.cli import main
from surgery_models import ours

pytest.importorskip("safetensors")


def hashes(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("extra", ["x\n\x1b[2J", "blocks.0.unknown_thing", "optimizer.exp_avg"])
def test_a_tensor_no_model_has_is_refused_and_nothing_changes(tmp_path, capsys, extra):
    state = dict(ours("vit").state_dict())
    state[extra] = torch.zeros(3)
    src, dst = tmp_path / "src.safetensors", tmp_path / "folded.safetensors"
    save_safetensors_atomic(state, src)
    dst.write_bytes(b"an earlier output")  # replaced only by a fold that succeeds (--force)
    before = hashes(tmp_path)
    assert main(["fold", str(src), str(dst), "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err, err
    shown = extra.replace("\n", "\\n").replace("\x1b", "\\x1b")
    assert err.startswith(f"layerscale fold: error: {src}: 1 tensor(s) that no model with our keys has (our ViT / "
                          f"CaiT / GPT, timm's ViT) would be copied into {dst} as they are: [{shown}]; remove them"), err
    assert hashes(tmp_path) == before


@pytest.mark.parametrize("name", ["vit", "cait", "gpt"])
def test_every_model_of_ours_still_folds_and_loads_strictly(tmp_path, name):
    model = ours(name)
    src, dst = tmp_path / "src.safetensors", tmp_path / "folded.safetensors"
    save_safetensors_atomic(model.state_dict(), src)
    assert main(["fold", str(src), str(dst)]) == 0
    plain = ours(name, residual="prenorm")
    plain.load_state_dict(read_state_dict_file(dst).tensors)  # strict: every key fits
