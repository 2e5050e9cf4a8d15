"""``layerscale prune`` of mixture-of-experts decoders (Mixtral, Qwen3 MoE, OLMoE, PhiMoE, gpt-oss, Granite MoE,
DeepSeek-V3, Qwen2 MoE): the written folder computes the source with that layer skipped (a forward hook that returns the
layer's input, written independently of the block editor), the KV cache right. A config that sets a layer's structure by
its position (DeepSeek-V3's ``first_k_dense_replace`` dense layers, Qwen2 MoE's ``mlp_only_layers``) is refused when the
pruned stack would not rebuild from it — before anything is written — and accepted when it would; ``grow`` refuses them
(no single output layer for γ in a mixture of experts). A refused edit leaves an ``inplace`` model as it was. The
hybrid stacks of Qwen3-Next and Qwen3.5 (attention and linear-attention layers) prune the same way, either kind of
layer, and refuse to grow; so do the state-space models of one branch per block (Mamba, Mamba-2, Falcon Mamba,
Nemotron-H, whose ``layers_block_type`` follows its blocks)."""

from __future__ import annotations

import pytest
import torch

from layerscale.cli import main

transformers = pytest.importorskip("transformers")

from source_models import assert_pruned_skips_layer, logits_skipping, pruned_folder  # noqa: E402

TEXT = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=64, max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=0)
FAMILIES = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=2, num_experts_per_tok=1)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(num_experts=2, num_experts_per_tok=1,
                                                                moe_intermediate_size=16, head_dim=8)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", dict(num_experts=2, num_experts_per_tok=1)),
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM", dict(num_local_experts=2, num_experts_per_tok=1)),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", dict(num_local_experts=2, num_experts_per_tok=1, head_dim=8,
                                                          sliding_window=4, layer_types=["sliding_attention",
                                                                                         "full_attention",
                                                                                         "sliding_attention"])),
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM", dict(num_local_experts=2, num_experts_per_tok=1,
                                                                     residual_multiplier=0.3)),
}
POSITIONAL = {  # configs that set a layer's MLP (dense or experts) by its index
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    dict(n_routed_experts=2, num_experts_per_tok=1, moe_intermediate_size=16, first_k_dense_replace=1,
                         kv_lora_rank=8, q_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
                         n_group=1, topk_group=1)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=2, num_experts_per_tok=1, moe_intermediate_size=16,
                       shared_expert_intermediate_size=16, mlp_only_layers=[1])),
}
TOKENS = torch.randint(2, 60, (2, 12), generator=torch.Generator().manual_seed(1))


def _build(family):
    config_name, model_name, extra = {**FAMILIES, **POSITIONAL}[family]
    torch.manual_seed(0)
    return getattr(transformers, model_name)(getattr(transformers, config_name)(**TEXT, **extra)).eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_pruned_folder_is_the_source_with_that_layer_skipped(tmp_path, family):
    assert_pruned_skips_layer(_build(family), tmp_path, main, TOKENS)


@pytest.mark.parametrize("family, refused, accepted", [("deepseek_v3", "0", "2"), ("qwen2_moe", "0", "2")])
def test_a_layer_structure_set_by_position_refuses_what_would_not_load_back(tmp_path, capsys, family, refused,
                                                                          accepted):
    source = _build(family)
    source.save_pretrained(tmp_path / "source")
    capsys.readouterr()  # transformers' own save output
    out = tmp_path / "refused"
    assert main(["prune", str(tmp_path / "source"), "--blocks", refused, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "layer 0" in error and "would not load back" in error
    assert not out.exists()
    (tmp_path / "kept").mkdir()
    pruned, info = pruned_folder(source, tmp_path / "kept", main, blocks=accepted)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert torch.equal(logits_skipping(pruned.eval(), TOKENS), logits_skipping(source, TOKENS, skip=int(accepted)))


def test_grow_refuses_a_mixture_of_experts_in_one_line_and_writes_nothing(tmp_path, capsys):
    _build("mixtral").save_pretrained(tmp_path / "source")
    capsys.readouterr()
    out = tmp_path / "grown"
    assert main(["grow", str(tmp_path / "source"), "--insert", "1", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "MixtralDecoderLayer" in error and "mixture of experts" in error
    assert not out.exists()


@pytest.mark.parametrize("edit", ["prune", "grow"])
def test_a_refused_edit_leaves_an_inplace_model_as_it_was(monkeypatch, edit):
    """The rebuild check runs on the source before anything is copied or changed: a refused ``grow(...,
    inplace=True)`` has not yet given the model its γ = 1 (nor ``prune`` removed a layer)."""
    from layerscale.surgery import grow, prune
    from layerscale.surgery.block_families.hf_decoder import HFDecoderFamily

    def refuse(self, model, blocks, origin):
        raise ValueError("refused by the rebuild check")

    monkeypatch.setattr(HFDecoderFamily, "check_rebuildable", refuse)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TEXT)).eval()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    config_before = model.config.to_dict()
    with pytest.raises(ValueError, match="refused by the rebuild check"):
        if edit == "grow":
            grow(model, insert=1, where="after:0", inplace=True)
        else:
            prune(model, [1], inplace=True)
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    assert model.config.to_dict() == config_before and type(model) is transformers.LlamaForCausalLM


HYBRID = {  # one layer type per entry of layer_types: linear attention (linear_attn) or full attention (self_attn)
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM", dict(num_experts=2, num_experts_per_tok=1,
                                                                   moe_intermediate_size=16, head_dim=8)),
    "qwen3_5_text": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", dict(head_dim=8)),
    "qwen3_5_moe_text": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", dict(num_experts=2, num_experts_per_tok=1,
                                                                             moe_intermediate_size=16, head_dim=8)),
}
HYBRID_TYPES = ["linear_attention", "full_attention", "full_attention"]


@pytest.mark.parametrize("family", HYBRID)
@pytest.mark.parametrize("skip", [0, 1])
def test_a_hybrid_stack_prunes_either_kind_of_layer_and_refuses_to_grow(tmp_path, capsys, family, skip):
    config_name, model_name, extra = HYBRID[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**TEXT, **extra, layer_types=HYBRID_TYPES)
    source = getattr(transformers, model_name)(config).eval()
    pruned = assert_pruned_skips_layer(source, tmp_path, main, TOKENS, skip=skip)
    assert pruned.config.layer_types == [t for i, t in enumerate(HYBRID_TYPES) if i != skip]
    source.save_pretrained(tmp_path / "to_grow")
    capsys.readouterr()
    assert main(["grow", str(tmp_path / "to_grow"), "--insert", "1", "--out", str(tmp_path / "grown")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "linear-attention" in error and not (tmp_path / "grown").exists()


STATE_SPACE = {  # one branch per block, x <- x + mixer(norm(x))
    "mamba": ("MambaConfig", "MambaForCausalLM", dict(state_size=4)),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM", dict(state_size=4, num_heads=8, head_dim=8, n_groups=1)),
    "falcon_mamba": ("FalconMambaConfig", "FalconMambaForCausalLM", dict(state_size=4)),
    # one block per mixer kind; layers_block_type (its layer_types) follows the blocks
    "nemotron_h": ("NemotronHConfig", "NemotronHForCausalLM",
                   dict(layers_block_type=["linear_attention", "full_attention", "mlp", "moe"], num_attention_heads=4,
                        num_key_value_heads=4, head_dim=8, intermediate_size=48, mamba_num_heads=8, mamba_head_dim=8,
                        n_groups=1, ssm_state_size=4, n_routed_experts=2, num_experts_per_tok=1,
                        moe_intermediate_size=16, moe_shared_expert_intermediate_size=16, n_group=1, topk_group=1)),
}


@pytest.mark.parametrize("family", STATE_SPACE)
def test_a_state_space_model_prunes_its_blocks_and_refuses_to_grow(tmp_path, capsys, family):
    config_name, model_name, extra = STATE_SPACE[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(hidden_size=32, num_hidden_layers=3, vocab_size=64, pad_token_id=0,
                                                bos_token_id=0, eos_token_id=1, **extra)
    source = getattr(transformers, model_name)(config).eval()
    pruned = assert_pruned_skips_layer(source, tmp_path, main, TOKENS, skip=2)  # Nemotron-H: its MLP block
    if family == "nemotron_h":
        assert pruned.config.layers_block_type == ["linear_attention", "full_attention", "moe"]
    source.save_pretrained(tmp_path / "to_grow")
    capsys.readouterr()
    assert main(["grow", str(tmp_path / "to_grow"), "--insert", "1", "--out", str(tmp_path / "grown")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "fused kernel" in error and not (tmp_path / "grown").exists()
