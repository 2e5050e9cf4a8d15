"""A model folder or run someone else made may describe a model far larger than its weights file: ``config.json``'s
sizes (``depth``, ``embed_dim``, timm's ``model_args``, transformers' ``num_hidden_layers``) are numbers anyone can
write. Each reader builds the model on the ``meta`` device first and refuses, in one line naming the file, a model
whose weights exceed this machine's memory before anything is allocated (exit status 2 on the CLI); the same folder
with its own sizes still loads, and a loader's dtype is what is counted."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from layerscale import machine
from layerscale.cli import main
from layerscale.models import VisionTransformer, validation
from layerscale.sources import read_source
from source_models import gpt2, hf_folder, timm_folder, timm_vit

#: sizes that are each within the per-argument limits, yet 3·10¹² parameters together (terabytes)
HUGE = {"depth": 64, "embed_dim": 65536, "num_heads": 16}
REFUSAL = r"config\.json.*parameters; loading it needs at least [0-9,.]+ GiB .*more than this machine's"


def _edit_json(path: Path, edit) -> None:
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


def _ours(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = VisionTransformer(img_size=8, patch_size=4, in_chans=1, num_classes=10, embed_dim=16, depth=2,
                              num_heads=2)
    return model.save_pretrained(tmp_path / "ours")


def test_our_folder_with_huge_sizes_is_refused_before_allocating(tmp_path):
    folder = _ours(tmp_path)
    _edit_json(folder / "config.json", lambda c: c.update(HUGE))
    started = time.perf_counter()
    with pytest.raises(ValueError, match=REFUSAL):
        VisionTransformer.from_pretrained(folder)
    assert time.perf_counter() - started < 60  # shapes only: allocating terabytes would fail or take far longer


def test_the_cli_refuses_it_in_one_line(tmp_path, capsys):
    folder = _ours(tmp_path)
    _edit_json(folder / "config.json", lambda c: c.update(HUGE))
    assert main(["analyze", str(folder), "--out", str(tmp_path / "report")]) == 2
    assert not (tmp_path / "report").exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parameters; loading it needs at least" in err and "config.json" in err


def test_our_folder_loads_when_it_fits_and_is_refused_when_memory_is_short(tmp_path, monkeypatch):
    folder = _ours(tmp_path)
    model = VisionTransformer.from_pretrained(folder)
    needed = validation.model_bytes(model, 2)
    monkeypatch.setattr(machine, "machine_memory_bytes", lambda: needed)
    VisionTransformer.from_pretrained(folder)  # exactly enough
    monkeypatch.setattr(machine, "machine_memory_bytes", lambda: needed - 1)
    with pytest.raises(ValueError, match=REFUSAL):
        VisionTransformer.from_pretrained(folder)


def test_a_run_whose_config_describes_a_huge_model_is_refused(train_with_cli, tmp_path):
    run = train_with_cli({"model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "depth": 1},
                          "data": {"name": "digits", "batch_size": 64, "augment": False},
                          "optim": {"epochs": 1, "max_steps": 2}}, "size-bound-run")
    config_path = run / "config.yaml"
    text = config_path.read_text()
    assert "embed_dim: 16" in text and "depth: 1" in text
    config_path.write_text(text.replace("embed_dim: 16", "embed_dim: 65536").replace("num_heads: 2", "num_heads: 16")
                           .replace("depth: 1", "depth: 64"))
    with pytest.raises(ValueError, match=r"config\.yaml: model 'vit': [0-9,]+ parameters; loading it needs"):
        read_source(run)


def test_a_timm_folder_with_huge_model_args_is_refused(tmp_path):
    pytest.importorskip("timm")
    folder = timm_folder(tmp_path / "timm", timm_vit(depth=2))
    read_source(folder)  # as saved: loads
    _edit_json(folder / "config.json", lambda c: c["model_args"].update(HUGE))
    with pytest.raises(ValueError, match=REFUSAL):
        read_source(folder)


def test_a_transformers_folder_with_huge_sizes_is_refused(tmp_path):
    pytest.importorskip("transformers")
    folder = hf_folder(tmp_path / "hf", gpt2(vocab=64), None)
    read_source(folder)  # as saved: loads
    _edit_json(folder / "config.json", lambda c: c.update(n_layer=64, n_embd=65536, n_head=16))
    with pytest.raises(ValueError, match=REFUSAL.replace(" .*more", r" \(the weights\), more")):
        read_source(folder)


def test_a_transformers_folder_is_counted_in_the_dtype_it_loads_in(tmp_path, monkeypatch):
    """A bfloat16 checkpoint whose float32 size exceeds the memory but whose bfloat16 size fits still loads (a 7B
    model in bfloat16 on a 24 GiB machine must not be refused for its float32 size)."""
    pytest.importorskip("transformers")
    from layerscale.surgery.hf.hf_loader import from_pretrained_with_layerscale
    from transformers import AutoModelForCausalLM

    model = gpt2(vocab=64).to(torch.bfloat16)
    folder = hf_folder(tmp_path / "hf", model, None)
    float32_bytes = validation.model_bytes(model, 1, torch.float32)
    monkeypatch.setattr(machine, "machine_memory_bytes", lambda: float32_bytes - 1)
    loaded = from_pretrained_with_layerscale(AutoModelForCausalLM, folder)
    assert next(loaded.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match=REFUSAL.replace(" .*more", r" \(the weights\), more")):
        from_pretrained_with_layerscale(AutoModelForCausalLM, folder, dtype=torch.float32)
