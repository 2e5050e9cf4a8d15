"""Written grown / pruned models load with the plain libraries at the new depth and compute what ours did:
timm.create_model, Hugging Face from_pretrained, our from_pretrained; the CLI refuses bad arguments in one line,
rc 2, nothing written."""

from __future__ import annotations

import json

import pytest
import torch

from layerscale import grow, prune
from layerscale.cli import main
from layerscale.integrations.hf_causal_lm import from_pretrained_with_layerscale
from layerscale.surgery.model_files import write_model_folder

from test_grow import IMAGES, TOKENS, hf_model, out, ours, timm_model

timm = pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")


def test_grown_timm_vit_loads_in_plain_timm(tmp_path):
    model = timm_model("vit_tiny_patch16_224")  # no LayerScale: source blocks gain γ = 1
    grown = grow(model, 2, where="top")
    write_model_folder(grown, "timm", tmp_path / "g", surgery={"operation": "grow"})
    loaded = timm.create_model(f"local-dir:{tmp_path / 'g'}", pretrained=True).eval()
    assert len(loaded.blocks) == 5
    assert torch.equal(out(loaded, IMAGES), out(model, IMAGES))
    config = json.loads((tmp_path / "g" / "config.json").read_text())
    assert config["layerscale_new_blocks"] == [3, 4] and config["model_args"]["depth"] == 5


def test_timm_folder_is_refused_on_a_timm_that_does_not_record_model_args(tmp_path, monkeypatch):
    # timm < 1.0.31 lacks get_model_args: its save_for_hf writes no constructor arguments, and the folder would
    # rebuild vit_tiny's defaults (depth 12, no LayerScale) instead of the grown model
    monkeypatch.delattr(timm.models, "get_model_args", raising=False)
    grown = grow(timm_model("vit_tiny_patch16_224"), 2, where="top")
    with pytest.raises(ImportError, match=r"needs timm>=1\.0\.31 \(timm .* does not record the model's constructor "
                                          r"arguments"):
        write_model_folder(grown, "timm", tmp_path / "g", surgery={"operation": "grow"})
    assert list(tmp_path.iterdir()) == []


def test_pruned_timm_vit_loads_at_new_depth_with_equal_logits(tmp_path):
    model = timm_model("deit3_small_patch16_224")
    pruned = prune(model, [1])
    write_model_folder(pruned, "timm", tmp_path / "p", surgery={"operation": "prune"})
    plain = timm.create_model("deit3_small_patch16_224", img_size=32, patch_size=8, depth=2, num_classes=5,
                              embed_dim=32, num_heads=2).eval()
    timm.models.load_checkpoint(plain, str(tmp_path / "p" / "model.safetensors"), strict=True)
    assert torch.equal(out(plain, IMAGES), out(pruned, IMAGES))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_pruned_hf_loads_with_plain_from_pretrained(tmp_path, family):
    model = hf_model(family, layers=3)
    pruned = prune(model, [1])
    write_model_folder(pruned, "transformers", tmp_path / "p", surgery={"operation": "prune"})
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "p").eval()
    assert loaded.config.num_hidden_layers == 2
    assert torch.equal(out(loaded, TOKENS), out(pruned, TOKENS))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_grown_hf_loads_at_new_depth(tmp_path, family):
    model = hf_model(family)
    grown = grow(model, 2, where="every:1")
    write_model_folder(grown, "transformers", tmp_path / "g", surgery={"operation": "grow"})
    # the save still holds γ: transformers' Auto class (registered by layerscale.integrations.hf_causal_lm) loads it
    # with its scales, a concrete class refuses it (docs/ecosystem.md); neither drops the scales
    auto = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "g").eval()
    assert torch.equal(out(auto, TOKENS), out(model, TOKENS))
    with pytest.raises(Exception, match="holds LayerScale scales"):
        type(model).from_pretrained(tmp_path / "g")
    scaled = from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path / "g").eval()
    assert scaled.config.num_hidden_layers == 4 and scaled.config.layerscale_new_blocks == [1, 3]
    assert torch.equal(out(scaled, TOKENS), out(model, TOKENS))


def test_grown_ours_loads_with_from_pretrained(tmp_path):
    from layerscale import GPT

    model = ours("gpt", residual="prenorm")
    grown = grow(model, 2, where="top")
    write_model_folder(grown, "layerscale", tmp_path / "g", surgery={"operation": "grow"})
    loaded = GPT.from_pretrained(tmp_path / "g")
    assert loaded.depth == 5 and loaded.residual == "layerscale"
    assert torch.equal(out(loaded, TOKENS), out(model, TOKENS))


def _hf_folder(tmp_path, family="gpt2"):
    folder = tmp_path / "src"
    hf_model(family).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_cli_grow_fold_loads_with_plain_from_pretrained(tmp_path, family, capsys):
    source = _hf_folder(tmp_path, family)
    assert main(["grow", str(source), "--insert", "2", "--where", "top", "--fold", "--out",
                 str(tmp_path / "g")]) == 0
    plain = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "g").eval()
    base = transformers.AutoModelForCausalLM.from_pretrained(source).eval()
    assert plain.config.num_hidden_layers == 4
    assert not any(n.endswith("layer_scale") for n, _ in plain.named_parameters())
    assert torch.equal(out(plain, TOKENS), out(base, TOKENS))


def test_cli_prune_hf_by_blocks(tmp_path, capsys):
    source = _hf_folder(tmp_path)
    assert main(["prune", str(source), "--blocks", "0", "--out", str(tmp_path / "p")]) == 0
    assert transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "p").config.num_hidden_layers == 1


@pytest.mark.parametrize("args,match", [
    (["grow", "{src}", "--insert", "0"], "--insert must be >= 1"),
    (["grow", "{src}", "--insert", "1", "--init", "random", "--seed", "-1"],
     "--seed must be in [0, 2**63 - 1], got -1"),
    (["grow", "{src}", "--insert", "1", "--seed", str(2 ** 70)], f"got {2 ** 70}"),
    (["grow", "{src}", "--insert", "1", "--where", "after:5"], "past the depth"),
    (["grow", "{missing}", "--insert", "1"], "no such model folder"),
    (["grow", "{bad}", "--insert", "1"], "cannot read"),
    (["prune", "{src}", "--remove", "2", "--by", "gamma"], "N < L"),
    (["prune", "{src}", "--blocks", "0,1"], "N < L"),
    (["prune", "{src}", "--remove", "1", "--by", "gamma"], "needs evaluation data"),
    (["prune", "{src}", "--remove", "1", "--by", "depth"], "unknown criterion"),
    (["prune", "{src}", "--remove", "1", "--by", "gamma", "--examples", "-3"], "--examples must be >= 1, got -3"),
    (["prune", "{src}", "--remove", "1", "--by", "gamma", "--seq-len", "1"], "--seq-len must be >= 2, got 1"),
])
def test_cli_bad_arguments_one_line_rc2_nothing_written(tmp_path, capsys, args, match):
    source = _hf_folder(tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "gpt2"}')
    (bad / "model.safetensors").write_bytes(b"not safetensors")
    dest = tmp_path / "dest"
    filled = [a.format(src=source, missing=tmp_path / "nope", bad=bad) for a in args]
    capsys.readouterr()
    assert main([*filled, "--out", str(dest)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err
    assert not dest.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".dest")]
