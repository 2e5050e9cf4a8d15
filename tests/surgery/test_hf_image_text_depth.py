"""Pruning and growing the language model of a Hugging Face image-text model (Gemma 3's
``Gemma3ForConditionalGeneration``, which ``AutoModelForCausalLM`` reads for a ``gemma3`` folder; LLaVA with a
Llama): the depth and the per-layer ``layer_types`` live in the nested text config, so that is where the new depth
is written — a load of the written folder then builds exactly the kept layers (nothing initialised afresh) and
computes the source with the layer skipped (grown: the source itself); the vision tower is not the stack."""

from __future__ import annotations

import pytest
import torch

from layerscale.cli import main
from layerscale.surgery import prune

transformers = pytest.importorskip("transformers")

from source_models import decoder_layers, logits_skipping  # noqa: E402

TEXT = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=64, max_position_embeddings=64)
VISION = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=28,
              patch_size=14)
TOKENS = torch.randint(2, 60, (2, 12), generator=torch.Generator().manual_seed(1))


def _gemma3():
    text = dict(TEXT, head_dim=8, sliding_window=4,
                layer_types=["sliding_attention", "full_attention", "sliding_attention"])
    config = transformers.Gemma3Config(text_config=text, vision_config=VISION, mm_tokens_per_image=4,
                                       boi_token_index=61, eoi_token_index=62, image_token_index=63)
    torch.manual_seed(0)
    return transformers.Gemma3ForConditionalGeneration(config).eval()


def _llava():
    config = transformers.LlavaConfig(text_config=dict(TEXT, model_type="llama"),
                                      vision_config=dict(VISION, model_type="clip_vision_model"), image_token_index=63)
    torch.manual_seed(0)
    return transformers.LlavaForConditionalGeneration(config).eval()


def test_gemma3_image_text_folder_pruned_from_the_command_line(tmp_path):
    source = _gemma3()
    source.save_pretrained(tmp_path / "source")
    out = tmp_path / "pruned"
    assert main(["prune", str(tmp_path / "source"), "--blocks", "1", "--out", str(out)]) == 0
    pruned, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert type(pruned).__name__ == "Gemma3ForConditionalGeneration"
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert pruned.config.text_config.num_hidden_layers == 2 and len(decoder_layers(pruned)) == 2
    assert pruned.config.text_config.layer_types == ["sliding_attention", "sliding_attention"]
    assert sum(type(m).__name__ == "SiglipEncoderLayer" for m in pruned.modules()) == 1
    assert torch.equal(logits_skipping(pruned.eval(), TOKENS), logits_skipping(source, TOKENS, skip=1))


def test_llava_pruned_in_python_saves_a_folder_of_the_kept_layers(tmp_path):
    source = _llava()
    prune(source, [1]).save_pretrained(tmp_path / "pruned")
    pruned, info = transformers.LlavaForConditionalGeneration.from_pretrained(tmp_path / "pruned",
                                                                              output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert pruned.config.text_config.num_hidden_layers == 2
    assert torch.equal(logits_skipping(pruned.eval(), TOKENS), logits_skipping(source, TOKENS, skip=1))


def test_gemma3_image_text_grown_records_the_depth_in_its_text_config(tmp_path):
    source = _gemma3()
    source.save_pretrained(tmp_path / "source")
    out = tmp_path / "grown"
    assert main(["grow", str(tmp_path / "source"), "--insert", "1", "--where", "after:1", "--out", str(out)]) == 0
    grown, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert grown.config.text_config.num_hidden_layers == 4
    assert grown.config.text_config.layer_types == ["sliding_attention", "full_attention", "full_attention",
                                                    "sliding_attention"]
    assert torch.equal(logits_skipping(grown.eval(), TOKENS), logits_skipping(source, TOKENS))
