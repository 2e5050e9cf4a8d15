"""Every loader either loads correctly or refuses: integer or boolean tensors where the model has floats (a foreign
file; ``load_state_dict`` casts them without a word) and NaN / infinite weights (attention on the CPU turns NaN rows
into zeros, so the logits can look finite) loaded silently through ``load_pretrained_into``, ``from_pretrained`` and
``load_run_model``. Each now refuses in one line naming the file and the tensor; native float dtypes still cast."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from layerscale.interop.convert import load_pretrained_into
from layerscale.models import VisionTransformer, create_model
from layerscale.sources.run_model import load_run_model

KEY = "blocks.0.attn.qkv.weight"


def _vit(**kw):
    torch.manual_seed(0)
    return create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, num_classes=3,
                        **kw).eval()


def _spoiled(state: dict, how: str) -> dict:
    state = {k: v.clone() for k, v in state.items()}
    if how == "int":
        state = {k: (v * 1000).to(torch.int32) for k, v in state.items()}
    elif how == "bool":
        state[KEY] = state[KEY] > 0
    else:
        state[KEY][0, 0] = float(how)
    return state


@pytest.mark.parametrize("how", ["int", "bool", "nan", "inf"])
def test_load_pretrained_into_refuses_them(tmp_path, how):
    path = tmp_path / "w.safetensors"
    save_file(_spoiled(_vit().state_dict(), how), str(path))
    model = _vit()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    expected = "another dtype than the model's" if how in ("int", "bool") else "NaN or infinite"
    with pytest.raises(ValueError, match=expected) as info:
        load_pretrained_into(model, path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # nothing copied
    with pytest.raises(ValueError, match=expected):
        load_pretrained_into(_vit(), _spoiled(_vit().state_dict(), how))  # a dict too


@pytest.mark.parametrize("how", ["int", "nan"])
def test_from_pretrained_refuses_them(tmp_path, how):
    folder = _vit().save_pretrained(tmp_path / "m")
    save_file(_spoiled(_vit().state_dict(), how), str(folder / "model.safetensors"))
    expected = "another dtype than the model's" if how == "int" else f"tensor '{KEY}' holds 1 NaN"
    with pytest.raises(ValueError, match=expected) as info:
        VisionTransformer.from_pretrained(folder)
    assert "model.safetensors" in str(info.value)


def test_native_float_dtypes_still_load_cast(tmp_path):
    state = {k: v.to(torch.bfloat16) for k, v in _vit().state_dict().items()}
    model = _vit()
    load_pretrained_into(model, state)
    assert next(model.parameters()).dtype == torch.float32
    folder = _vit().to(torch.float16).save_pretrained(tmp_path / "half")
    assert next(VisionTransformer.from_pretrained(folder).parameters()).dtype == torch.float32


def test_load_run_model_refuses_nan_weights(train_with_cli):
    run = train_with_cli({"model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "depth": 1},
                          "data": {"name": "digits", "batch_size": 64, "augment": False},
                          "optim": {"epochs": 1, "max_steps": 2}}, "nan-run-model")
    checkpoint = sorted((run / "checkpoints").iterdir())[-1]
    weights = checkpoint / "model.safetensors"
    from safetensors.torch import load_file

    state = load_file(str(weights))
    key = next(k for k in state if k.endswith("qkv.weight"))
    state[key][0, 0] = float("nan")
    save_file(state, str(weights), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=f"tensor '{key}' holds 1 NaN or infinite value"):
        load_run_model(checkpoint)


@pytest.mark.parametrize("option", ["strict", "resample_pos_embed"])
@pytest.mark.parametrize("bad", ["no", 0, None])
def test_the_loaders_flags_are_bools_not_truthy_values(option, bad):
    """``strict="no"`` read as true (and ``resample_pos_embed="yes"`` as asked): one line naming the flag."""
    with pytest.raises(ValueError, match=f"^{option} must be True or False, got {bad!r}$"):
        load_pretrained_into(_vit(), _vit().state_dict(), **{option: bad})
