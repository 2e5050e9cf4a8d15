"""Crafted checkpoints given to ``layerscale fold`` (issue 30, item 1): a bias of the wrong shape, float8 or integer
weights, an integer scale, a per-head scale with no values. Each is one line, exit status 2, no output file, and
the source file unchanged — never a traceback, and never a fold that casts γ to an integer (0.1 → 0)."""

import pytest
import torch
from safetensors.torch import save_file

from layerscale.cli import main
from layerscale.models import create_model
from layerscale.surgery import fold_state_dict


def _state(residual="layerscale"):
    model = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=16, depth=1,
                         num_heads=2, residual=residual)
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def _edit(key, make, residual="layerscale"):
    def build():
        state = _state(residual)
        state[key] = make(state[key])
        return state
    return build


FOLDS = [
    ("bias shape", _edit("blocks.0.attn.proj.bias", lambda b: torch.zeros(3)),
     "cannot fold blocks.0.ls1.gamma: blocks.0.attn.proj.bias has shape (3,) and dtype torch.float32, expected (16,)"),
    ("float8 weight", _edit("blocks.0.attn.proj.weight", lambda w: w.to(torch.float8_e4m3fn)),
     "cannot fold blocks.0.ls1.gamma into blocks.0.attn.proj.weight of dtype torch.float8_e4m3fn"),
    ("uint16 weight", _edit("blocks.0.mlp.fc2.weight", lambda w: (w * 100).abs().to(torch.uint16)),
     "cannot fold blocks.0.ls2.gamma into blocks.0.mlp.fc2.weight of dtype torch.uint16"),
    ("uint32 weight", _edit("blocks.0.mlp.fc2.weight", lambda w: (w * 100).abs().to(torch.uint32)),
     "cannot fold blocks.0.ls2.gamma into blocks.0.mlp.fc2.weight of dtype torch.uint32"),
    ("int64 bias", _edit("blocks.0.mlp.fc2.bias", lambda b: b.to(torch.int64)),
     "blocks.0.mlp.fc2.bias has shape (16,) and dtype torch.int64"),
    ("integer scale", _edit("blocks.0.ls1.gamma", lambda g: g.to(torch.int32)),
     "cannot fold blocks.0.ls1.gamma: its dtype is torch.int32, expected one of torch.float16"),
    ("empty head scale", _edit("blocks.0.attn.head_scale.gamma", lambda g: torch.zeros(0), residual="layerscale_head"),
     "cannot fold blocks.0.attn.head_scale.gamma: it holds no values (shape (0,))"),
]


@pytest.mark.parametrize("case", FOLDS, ids=[c[0] for c in FOLDS])
def test_crafted_checkpoint_is_refused_by_fold(tmp_path, capsys, case):
    _, build, message = case
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    save_file(build(), str(src))
    before = src.read_bytes()
    assert main(["fold", str(src), str(dst)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("layerscale fold: error: ") and message in err, err
    assert not dst.exists() and src.read_bytes() == before
    assert list(tmp_path.iterdir()) == [src]  # no temporary file left either


def test_half_precision_still_folds_exactly_in_its_dtype():
    state = {k: v.to(torch.bfloat16) for k, v in _state().items()}
    folded, counts = fold_state_dict(state)
    assert counts == {"ls1.gamma -> attn.proj": 1, "ls2.gamma -> mlp.fc2": 1}
    assert folded["blocks.0.mlp.fc2.weight"].dtype == torch.bfloat16
    expected = state["blocks.0.mlp.fc2.weight"] * state["blocks.0.ls2.gamma"].unsqueeze(1)
    assert torch.equal(folded["blocks.0.mlp.fc2.weight"], expected)
