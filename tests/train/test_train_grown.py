"""Training a grown model with its source blocks frozen (LLaMA Pro): only the new blocks' parameters change, their
γ sits in the no-decay group; the same from a grown folder through run.init_from + optim.trainable=new_blocks."""

from __future__ import annotations

import torch
from train_helpers import tiny_config

from layerscale import create_model, grow
from layerscale.checkpoint_io import read_state_dict_file
from layerscale.surgery import freeze_all_but_new_blocks
from layerscale.surgery.model_files import write_model_folder
from layerscale.train import param_groups, run


def test_only_new_blocks_change_after_a_step():
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=2, embed_dim=32, depth=2, num_heads=2, num_classes=10)
    grown = grow(model, 1, where="top", gamma=0.0)
    trainable = freeze_all_but_new_blocks(grown)
    assert trainable and all(name.startswith("blocks.2.") for name in trainable)
    decay, no_decay = param_groups(grown, 0.05)
    assert {"blocks.2.ls1.gamma", "blocks.2.ls2.gamma"} <= set(no_decay["param_names"])
    assert set(decay["param_names"]) | set(no_decay["param_names"]) == set(trainable)
    before = {k: v.clone() for k, v in grown.state_dict().items()}
    opt = torch.optim.AdamW([g for g in (decay, no_decay) if g["params"]], lr=1e-2)
    grown.train()
    torch.nn.functional.cross_entropy(grown(torch.randn(4, 3, 8, 8)), torch.tensor([0, 1, 2, 3])).backward()
    opt.step()
    changed = {k for k, v in grown.state_dict().items() if not torch.equal(v, before[k])}
    assert changed and all(k.startswith("blocks.2.") for k in changed)
    assert "blocks.2.ls1.gamma" in changed  # γ grows away from zero


def test_train_from_grown_folder_with_new_blocks_only(tmp_path):
    cfg = tiny_config(optim={"max_steps": 3, "warmup_steps": 0})
    source = run(cfg, out=tmp_path / "src")
    weights = read_state_dict_file(source.checkpoint / "model.safetensors").tensors
    model = create_model("vit", img_size=8, in_chans=1, num_classes=10, **{k: v for k, v in cfg["model"].items()
                                                                           if k != "name"})
    model.load_state_dict(weights)
    write_model_folder(grow(model, 2, where="every:1"), "layerscale", tmp_path / "grown",
                       surgery={"operation": "grow"})
    cfg_grown = tiny_config(model={"depth": 4}, optim={"max_steps": 3, "warmup_steps": 0,
                                                       "trainable": "new_blocks"},
                            run={"init_from": str(tmp_path / "grown")})
    result = run(cfg_grown, out=tmp_path / "grown_run")
    after = read_state_dict_file(result.checkpoint / "model.safetensors").tensors
    start = read_state_dict_file(tmp_path / "grown" / "model.safetensors").tensors
    changed = {k for k in after if not torch.equal(after[k], start[k])}
    assert changed and all(k.startswith(("blocks.1.", "blocks.3.")) for k in changed)
