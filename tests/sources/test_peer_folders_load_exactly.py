"""A timm or Hugging Face folder loads as exactly the model its files hold, or is refused in one line.

Before: timm's ``pretrained=True`` load dropped a classifier whose size a lying ``config.json`` named differently,
shifted its rows by ``label_offset`` and loaded non-strictly with ``pretrained_strict: false``; transformers cast
int8 weights to float, took a second copy of a weight from a shard the index did not name, applied a PEFT adapter,
and read a 600 MB ``generation_config.json`` whole. Every one of those was analysed, pruned or grown as if it were
the checkpoint.
"""

from __future__ import annotations

import json

import pytest
import torch

from layerscale.sources import read_source

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")
safetensors_torch = pytest.importorskip("safetensors.torch")

from source_models import gpt2, hf_folder, timm_folder, timm_vit  # noqa: E402


def _refused(folder, *needles):
    with pytest.raises(ValueError) as exc:
        read_source(folder)
    message = str(exc.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


def _edit_json(path, **changes):
    content = json.loads(path.read_text())
    content.update(changes)
    path.write_text(json.dumps(content))


def _edit_weights(path, edit):
    tensors = safetensors_torch.load_file(str(path))
    edit(tensors)
    safetensors_torch.save_file(tensors, str(path), metadata={"format": "pt"})


# --- timm ---------------------------------------------------------------------------------------------------------

def test_a_timm_folder_loads_its_own_tensors_from_safetensors_or_a_pytorch_file(tmp_path):
    model = timm_vit()
    for name, safe in (("safe", True), ("bin", False)):
        folder = tmp_path / name
        timm.models.save_for_hf(model, str(folder), safe_serialization=safe)
        loaded = read_source(folder).model.state_dict()
        assert loaded.keys() == model.state_dict().keys()
        assert all(torch.equal(loaded[k], v) for k, v in model.state_dict().items()), name


def test_timm_config_naming_another_classifier_size_is_refused_not_reinitialised(tmp_path):
    folder = timm_folder(tmp_path / "vit", timm_vit())  # 10 classes in the file
    config = json.loads((folder / "config.json").read_text())
    config["num_classes"] = 12
    config["model_args"]["num_classes"] = 12  # timm would drop the head and start a random one
    (folder / "config.json").write_text(json.dumps(config))
    _refused(folder, "head.weight", "(10, 32) vs (12, 32)")


def test_timm_label_offset_and_non_strict_loading_are_not_applied(tmp_path):
    folder = timm_folder(tmp_path / "vit", timm_vit())
    config = json.loads((folder / "config.json").read_text())
    config["pretrained_cfg"]["label_offset"] = 1
    config["model_args"]["num_classes"] = 9  # timm keeps rows 1..9 of the file's head
    (folder / "config.json").write_text(json.dumps(config))
    _refused(folder, "head.weight")
    deeper = timm_folder(tmp_path / "deeper", timm_vit(depth=3))
    config = json.loads((deeper / "config.json").read_text())
    config["model_args"]["depth"] = 4
    config["model_args"]["pretrained_strict"] = False  # timm would leave block 3 at its initialisation
    (deeper / "config.json").write_text(json.dumps(config))
    _refused(deeper, "missing", "blocks.3.")


def test_timm_integer_weights_are_refused_not_cast(tmp_path):
    folder = timm_folder(tmp_path / "vit", timm_vit())
    _edit_weights(folder / "model.safetensors",
                  lambda t: t.update({"blocks.1.mlp.fc1.weight": t["blocks.1.mlp.fc1.weight"].to(torch.int8)}))
    _refused(folder, "blocks.1.mlp.fc1.weight", "torch.int8")


# --- Hugging Face -----------------------------------------------------------------------------------------------

def test_integer_weights_in_a_transformers_folder_are_refused_not_cast(tmp_path):
    folder = hf_folder(tmp_path / "gpt2", gpt2(64), None)
    _edit_weights(folder / "model.safetensors", lambda t: t.update(
        {"transformer.h.1.mlp.c_fc.weight": t["transformer.h.1.mlp.c_fc.weight"].to(torch.int8)}))
    _refused(folder, "transformer.h.1.mlp.c_fc.weight", "torch.int8")


def test_a_weight_in_a_shard_the_index_does_not_name_is_refused(tmp_path):
    folder = hf_folder(tmp_path / "sharded", gpt2(64), None, shard="20KB")
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    name = "transformer.wte.weight"
    other = next(shard for shard in sorted(set(index.values())) if shard != index[name])
    _edit_weights(folder / other, lambda t: t.update({name: torch.full((64, 32), 7.0)}))  # transformers reads it
    _refused(folder, other, name, "places elsewhere")


def test_a_single_file_beside_an_index_is_refused(tmp_path):
    model = gpt2(64)
    folder = hf_folder(tmp_path / "sharded", model, None, shard="20KB")
    hf_folder(tmp_path / "single", model, None)
    (folder / "model.safetensors").write_bytes((tmp_path / "single" / "model.safetensors").read_bytes())
    _refused(folder, "both model.safetensors and model.safetensors.index.json")


def test_a_peft_adapter_in_the_folder_is_refused(tmp_path):
    folder = hf_folder(tmp_path / "gpt2", gpt2(64), None)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2,
                                                            "target_modules": ["c_attn"]}))
    _refused(folder, "PEFT adapter", "merge_and_unload")


def test_an_oversized_generation_config_is_refused_before_it_is_read(tmp_path):
    folder = hf_folder(tmp_path / "gpt2", gpt2(64), None)
    with open(folder / "generation_config.json", "wb") as handle:  # sparse: no disk used
        handle.truncate(600 << 20)
    _refused(folder, "generation_config.json", str(600 << 20))


def test_a_checkpoint_of_the_older_layout_still_loads_and_is_checked(tmp_path):
    """GPT-2 as first published: names without the ``transformer.`` prefix and the causal-mask buffers that
    transformers declares it ignores (``_keys_to_ignore_on_load_unexpected``)."""
    model = gpt2(64, positions=32)
    folder = hf_folder(tmp_path / "gpt2", model, None)
    old = {k.removeprefix("transformer."): v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    for block in range(3):
        old[f"h.{block}.attn.bias"] = torch.tril(torch.ones(1, 1, 32, 32))
    safetensors_torch.save_file(old, str(folder / "model.safetensors"), metadata={"format": "pt"})
    loaded = read_source(folder).model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in model.state_dict().items())
    old["h.0.attn.c_attn.weight"][0, 0] += 1.0
    safetensors_torch.save_file(old, str(folder / "model.safetensors"), metadata={"format": "pt"})
    assert not torch.equal(read_source(folder).model.transformer.h[0].attn.c_attn.weight,
                           model.transformer.h[0].attn.c_attn.weight)  # the file's value, not the model's


def test_the_check_itself_names_a_weight_the_library_changed(tmp_path):
    """:func:`check_loaded_as_saved`, the rule both loaders end with: a changed value, a reshaped tensor, an
    entry the files lack (not tied to a saved one) and a saved tensor with no entry are each one line."""
    from layerscale.weight_checks import check_loaded_as_saved

    weight = torch.ones(2, 3)
    loaded = {"a.weight": weight, "tied.weight": weight, "b.bias": torch.zeros(3)}
    saved = [("a.weight", torch.ones(2, 3, dtype=torch.float16)), ("b.bias", torch.zeros(3))]
    check_loaded_as_saved(loaded, iter(saved), "f")  # float16 casts; the tied entry shares a saved tensor's memory
    for bad, needle in (([("a.weight", torch.full((2, 3), 2.0)), ("b.bias", torch.zeros(3))], "differs"),
                        ([("a.weight", torch.ones(3, 2)), ("b.bias", torch.zeros(3))], "shape"),
                        ([("a.weight", torch.ones(2, 3))], "b.bias"),
                        ([*saved, ("c.weight", torch.ones(1))], "c.weight")):
        with pytest.raises(ValueError, match=needle):
            check_loaded_as_saved(loaded, iter(bad), "f")
    check_loaded_as_saved({"model.x": torch.ones(1)}, iter([("x", torch.ones(1))]), "f", prefix="model.")
    check_loaded_as_saved(loaded, iter([*saved, ("mask", torch.ones(1))]), "f", may_skip=lambda n: n == "mask")


def test_a_folder_of_neither_a_causal_language_model_nor_an_image_classifier_is_refused_in_a_short_line(tmp_path):
    """transformers' own refusal of a folder of another task listed every type it knows (3,300 characters)."""
    config = transformers.DistilBertConfig(dim=16, n_layers=2, n_heads=2, hidden_dim=32, vocab_size=50,
                                           max_position_embeddings=16)
    transformers.DistilBertForMaskedLM(config).save_pretrained(tmp_path / "distilbert")
    message = _refused(tmp_path / "distilbert", "a Hugging Face 'distilbert' model", "causal language models",
                       "image classifiers", "analyze_depth")
    assert len(message) < 400
