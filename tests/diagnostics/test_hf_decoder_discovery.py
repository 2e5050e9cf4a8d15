"""``find_blocks`` on Hugging Face decoder layers of every residual layout: for each block, the branch outputs it
finds add up to what the block does, ``y = x + s₁ + s₂``, and the stream it finds entering the MLP branch is
``x + s₁`` — Llama and Qwen3 (Pre-LN), Granite (``x + m · F``), Gemma 2 / 3, OLMo 2 / 3 and EXAONE 4 (each branch's
output normalised before the add, where the Pre-LN reading would take the un-normalised attention output), and GPT-J,
Phi, Cohere, GPT-NeoX, StableLM and Falcon with parallel branches (the MLP branch reads the block's input ``x``; Falcon
adds the attention output into the MLP's in place, and its Falcon-RW layers are sequential), OPT, BLOOM and Granite MoE
(branches named otherwise). Configurations that are not a residual stack are refused in one line."""

from __future__ import annotations

import re

import pytest
import torch

from layerscale.diagnostics import LayerScaleMonitor, find_blocks

transformers = pytest.importorskip("transformers")

from hf_tiny_models import branch_errors  # noqa: E402

BASE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=64, max_position_embeddings=32, pad_token_id=0)
LAYOUTS = {"llama": ("LlamaConfig", "LlamaForCausalLM", {}),
           "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=8)),
           "granite": ("GraniteConfig", "GraniteForCausalLM", dict(residual_multiplier=0.3)),
           "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(head_dim=8)),
           "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(head_dim=8)),
           "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
           "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", {}),
           "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", dict(head_dim=8)),
           # both branches read the block's input
           "gptj": ("GPTJConfig", "GPTJForCausalLM", dict(n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                                          rotary_dim=4)),
           "phi": ("PhiConfig", "PhiForCausalLM", {}),
           "cohere": ("CohereConfig", "CohereForCausalLM", {}),
           "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(use_parallel_residual=True)),
           "gpt_neox_sequential": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(use_parallel_residual=False)),
           "stablelm_parallel": ("StableLmConfig", "StableLmForCausalLM", dict(use_parallel_residual=True)),
           # named otherwise: OPT's MLP is the layer's own fc1 / fc2 on flattened tokens; BLOOM's modules add the
           # residual themselves; Granite MoE's MLP branch is its block_sparse_moe
           "opt": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=48, word_embed_proj_dim=32)),
           "bloom": ("BloomConfig", "BloomForCausalLM", dict(n_layer=2, n_head=4)),
           "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM", dict(num_local_experts=2, num_experts_per_tok=1,
                                                                            residual_multiplier=0.3,
                                                                            experts_implementation="eager")),
           # Falcon adds the attention output into the MLP's output in place (mlp_output += attention_output):
           # 7B's parallel layer with one norm, 40B's new architecture with two, Falcon 2's with one, and
           # Falcon-RW's sequential layer with ALiBi
           "falcon": ("FalconConfig", "FalconForCausalLM", dict(ffn_hidden_size=48)),
           "falcon_new_architecture": ("FalconConfig", "FalconForCausalLM",
                                       dict(ffn_hidden_size=48, new_decoder_architecture=True, num_kv_heads=2)),
           "falcon_new_architecture_one_norm": ("FalconConfig", "FalconForCausalLM",
                                                dict(ffn_hidden_size=48, new_decoder_architecture=True, num_kv_heads=2,
                                                     num_ln_in_parallel_attn=1)),
           "falcon_sequential": ("FalconConfig", "FalconForCausalLM", dict(ffn_hidden_size=48, parallel_attn=False,
                                                                           alibi=True)),
           # MPT's MLP adds the residual itself: ffn(norm_2(x), x)
           "mpt": ("MptConfig", "MptForCausalLM", dict(d_model=32, n_heads=4, n_layers=2))}
PARALLEL = {"gptj", "phi", "cohere", "gpt_neox", "stablelm_parallel", "falcon", "falcon_new_architecture",
            "falcon_new_architecture_one_norm"}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_found_branch_outputs_add_up_to_each_block(layout):
    config_name, model_name, extra = LAYOUTS[layout]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**BASE, **extra)).double().eval()
    with torch.no_grad():  # norm weights away from their initial values, so a skipped norm shows
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
    probes = find_blocks(model)
    assert len(probes) == 2 and all(probe.checked for probe in probes)
    # None: the block's own input (both branches read it)
    assert [probe.branches[1].stream_module is None for probe in probes] == [layout in PARALLEL] * 2
    tokens = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(1))
    for y_error, stream_error, smallest in branch_errors(probes, lambda: model(tokens, use_cache=False)):
        assert y_error < 1e-12 and stream_error < 1e-12 and smallest > 1e-3


NOT_A_RESIDUAL_STACK = {  # configurations whose layers are not x <- x + s with s one module's output
    "opt_post_ln": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=48, word_embed_proj_dim=32, do_layer_norm_before=False),
                    "do_layer_norm_before=False"),
    "bloom_post_ln_residual": ("BloomConfig", "BloomForCausalLM",
                               dict(n_layer=2, n_head=4, apply_residual_connection_post_layernorm=True),
                               "apply_residual_connection_post_layernorm=True"),
    "bloom_sliced": ("BloomConfig", "BloomForCausalLM", dict(n_layer=2, n_head=4, pretraining_tp=2,
                                                             slow_but_exact=True), "slow_but_exact=True"),
    "granitemoe_shared": ("GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM",
                          dict(num_local_experts=2, num_experts_per_tok=1, shared_intermediate_size=16),
                          "shared MLP"),
}


@pytest.mark.parametrize("layout", NOT_A_RESIDUAL_STACK)
def test_a_layer_that_is_not_a_residual_stack_is_refused_in_one_line(layout):
    config_name, model_name, extra, reason = NOT_A_RESIDUAL_STACK[layout]
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**BASE, **extra))
    with pytest.raises(ValueError, match=reason) as caught:
        find_blocks(model)
    message = str(caught.value)
    assert "\n" not in message and re.search(r"\b(layers|h)\.0: ", message)  # names the first layer


def test_the_monitor_reads_falcons_mlp_branch_before_the_layer_adds_the_attention_output_into_it():
    config_name, model_name, extra = LAYOUTS["falcon"]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**BASE, **extra)).double().train()
    seen = {}
    handles = [module.register_forward_hook(lambda m, a, out, key=(i, name): seen.__setitem__(
        key, (out[0] if isinstance(out, tuple) else out).clone()))
               for i, layer in enumerate(model.transformer.h)
               for name, module in (("attn", layer.self_attention), ("mlp", layer.mlp))]
    handles += [layer.register_forward_pre_hook(lambda m, a, k, i=i: seen.__setitem__((i, "x"), a[0] if a else
                                                                                      k["hidden_states"]),
                                                with_kwargs=True) for i, layer in enumerate(model.transformer.h)]
    monitor = LayerScaleMonitor(model, every=1)
    monitor.begin_step(0)
    tokens = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(1))
    try:
        with torch.no_grad():
            model(tokens, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    record = monitor.end_step()
    for i, block in enumerate(record["blocks"]):  # parallel: both branches are measured against the block's input
        x = seen[(i, "x")].norm().item()
        assert block["attn"]["ratio"] == pytest.approx(seen[(i, "attn")].norm().item() / x, rel=1e-6)
        assert block["mlp"]["ratio"] == pytest.approx(seen[(i, "mlp")].norm().item() / x, rel=1e-6)
        # what the MLP's output tensor holds once the layer has added into it: a read after the hook would give this
        assert block["mlp"]["ratio"] != pytest.approx((seen[(i, "mlp")] + seen[(i, "attn")]).norm().item() / x,
                                                      rel=1e-3)
