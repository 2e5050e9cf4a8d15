"""from_pretrained_with_layerscale refuses a checkpoint that does not fit, in one line naming the key: γ dropped
from a folder whose config.json is marked as holding it (it loaded without γ, another function), a weight missing
(transformers left it at its random initialisation, its warning silenced while γ was loaded) or an extra key."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")
from safetensors.torch import load_file, save_file  # noqa: E402

from layerscale import add_layerscale  # noqa: E402
from layerscale.integrations.hf_causal_lm import from_pretrained_with_layerscale  # noqa: E402

SCALE = ".layer_scale"


def _folder(tmp_path, edit):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=64, max_position_embeddings=16)
    model = add_layerscale(transformers.LlamaForCausalLM(config).eval(), init_value=0.5)
    model.save_pretrained(tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    return model


def _load(tmp_path):
    return from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path)


def test_scales_dropped_from_a_marked_folder_are_refused(tmp_path):
    _folder(tmp_path, lambda t: [t.pop(k) for k in [k for k in t if k.endswith(SCALE)]])
    with pytest.raises(ValueError, match=r"llama_layerscale.*no \*\.layer_scale keys") as info:
        _load(tmp_path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("scales", [True, False], ids=["with-scales", "plain"])
def test_a_missing_weight_is_refused(tmp_path, scales):
    def edit(tensors):
        tensors.pop("model.layers.1.mlp.up_proj.weight")
        if not scales:
            [tensors.pop(k) for k in [k for k in tensors if k.endswith(SCALE)]]
    _folder(tmp_path, edit)
    if not scales:
        (tmp_path / "config.json").write_text((tmp_path / "config.json").read_text().replace("llama_layerscale",
                                                                                             "llama"))
    with pytest.raises(ValueError, match=r"missing keys \['model\.layers\.1\.mlp\.up_proj\.weight'\]") as info:
        _load(tmp_path)
    assert "\n" not in str(info.value)


def test_an_extra_key_is_refused(tmp_path):
    _folder(tmp_path, lambda t: t.__setitem__("model.layers.1.mlp.extra.weight", torch.zeros(3)))
    with pytest.raises(ValueError, match=r"unexpected keys \['model\.layers\.1\.mlp\.extra\.weight'\]"):
        _load(tmp_path)


def test_an_intact_folder_loads_bit_for_bit_and_gives_its_load_report(tmp_path):
    model = _folder(tmp_path, lambda t: None)
    loaded, info = from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path,
                                                   output_loading_info=True)
    assert not info["missing_keys"]
    saved, own = model.state_dict(), loaded.state_dict()
    assert saved.keys() == own.keys() and all(torch.equal(saved[k], own[k]) for k in saved)


def test_a_config_that_disagrees_with_the_weights_shapes_is_refused_naming_a_tensor(tmp_path):
    """transformers raises "look at the above report", a report this loader silences: the line names the tensors
    and both shapes instead."""
    _folder(tmp_path, lambda t: None)
    config = (tmp_path / "config.json").read_text()
    (tmp_path / "config.json").write_text(config.replace('"vocab_size": 64', '"vocab_size": 48'))
    with pytest.raises(ValueError, match=r"2 tensor\(s\) of another shape \[lm_head\.weight: checkpoint \(64, 32\) "
                                         r"vs config \(48, 32\); model\.embed_tokens\.weight") as info:
        _load(tmp_path)
    assert "\n" not in str(info.value) and "above report" not in str(info.value)


def test_the_mismatch_line_also_when_the_caller_passed_ignore_mismatched_sizes_false(tmp_path):
    _folder(tmp_path, lambda t: None)
    config = (tmp_path / "config.json").read_text()
    (tmp_path / "config.json").write_text(config.replace('"vocab_size": 64', '"vocab_size": 48'))
    with pytest.raises(ValueError, match=r"2 tensor\(s\) of another shape"):
        from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path, ignore_mismatched_sizes=False)
