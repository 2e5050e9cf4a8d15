"""LoRA healing of a model holding γ inside its linear layers (``add_layerscale`` on a Hugging Face model:
``LayerScaledLinear``) adapts the weight before γ, so the merge is exact: peft alone adds its update after γ, and
merging that into the weight scaled it by γ (the merged model computed another function than the adapted one,
silently)."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

from layerscale import add_layerscale  # noqa: E402
from layerscale.surgery.healing.lora import ScaledBranch, add_lora, merge_lora  # noqa: E402
from layerscale.surgery.scaled_linear import LayerScaledLinear  # noqa: E402


def _llama(scaled: bool):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=64, max_position_embeddings=16)
    model = transformers.LlamaForCausalLM(config).eval()
    if scaled:
        model = add_layerscale(model, init_value=0.5)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith(".layer_scale"):
                    param.uniform_(0.1, 0.9)
    return model


def _random_adapters(wrapped):
    with torch.no_grad():
        for name, param in wrapped.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))


def test_every_linear_is_adapted_with_or_without_layer_scale():
    plain, scaled = add_lora(_llama(False), rank=4), add_lora(_llama(True), rank=4)
    count = [sum("lora_A" in n for n, _ in m.named_parameters()) for m in (plain, scaled)]
    assert count[0] == count[1] == 2 * 7  # q, k, v, o, gate, up, down in each of 2 layers
    branches = [m for m in scaled.modules() if isinstance(m, ScaledBranch)]
    assert len(branches) == 4 and not [m for m in scaled.modules() if isinstance(m, LayerScaledLinear)]
    targets = scaled.peft_config["default"].target_modules
    assert len([n for n in targets if n.endswith((".o_proj.linear", ".down_proj.linear"))]) == 4
    assert not [n for n in targets if n.endswith((".o_proj", ".down_proj"))]


def test_the_merged_model_computes_what_the_adapted_one_did_and_keeps_its_layout():
    base = _llama(True)
    keys = sorted(base.state_dict())
    gammas = {n: p.detach().clone() for n, p in base.named_parameters() if n.endswith(".layer_scale")}
    wrapped = add_lora(base, rank=4)
    _random_adapters(wrapped)
    tokens = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(2))
    wrapped.eval()
    adapted = wrapped(tokens).logits
    merged = merge_lora(wrapped).eval()
    assert torch.allclose(merged(tokens).logits, adapted, atol=1e-5)
    assert sorted(merged.state_dict()) == keys  # LayerScaledLinear again: saves with its γ keys
    assert sum(isinstance(m, LayerScaledLinear) for m in merged.modules()) == 4
    for name, param in merged.named_parameters():
        if name.endswith(".layer_scale"):
            assert torch.equal(param.detach(), gammas[name])


def test_plain_peft_merges_a_scaled_layer_into_another_function():
    """What docs/ecosystem.md warns of: peft's own get_peft_model / merge_and_unload on the unsplit layers."""
    from peft import LoraConfig, get_peft_model

    wrapped = get_peft_model(_llama(True), LoraConfig(r=4, lora_alpha=8.0, target_modules=["o_proj", "down_proj"]))
    _random_adapters(wrapped)
    tokens = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(2))
    wrapped.eval()
    with torch.no_grad():
        adapted = wrapped(tokens).logits
        merged = wrapped.merge_and_unload().eval()(tokens).logits
    assert (merged - adapted).abs().max() > 1e-2


def test_the_merge_leaves_each_parameter_as_trainable_as_it_was_before_the_adapters():
    """peft freezes every base weight; merge_lora used to make all of them trainable, unfreezing what the user had
    frozen (here the embedding and γ), so a training after the merge trained them silently."""
    model = _llama(scaled=True)
    frozen = {"model.embed_tokens.weight"} | {n for n, _ in model.named_parameters() if n.endswith(".layer_scale")}
    for name, param in model.named_parameters():
        param.requires_grad_(name not in frozen)
    wrapped = add_lora(model, rank=2)
    assert all("lora_" in n for n, p in wrapped.named_parameters() if p.requires_grad)
    merged = merge_lora(wrapped)
    assert {n for n, p in merged.named_parameters() if not p.requires_grad} == frozen
    assert len(frozen) == 5 and sum(p.requires_grad for p in merged.parameters()) > 0
