"""Tiny float64 Hugging Face causal LMs built from a model type alone, and the branch check discovery is held to.

:func:`tiny_causal_lm` starts from the config class's defaults and shrinks whichever size fields it declares (width 32,
2 layers, 4 heads of 8 channels — multi-head latent attention's too —, 2 experts, ...); per-layer lists sized to the
default depth keep one entry of each of their first two kinds. :func:`branch_errors` runs one forward with hooks and
measures, for each discovered block, how far ``y`` is from ``x + s_attn + s_mlp`` and the stream found entering the MLP
branch from ``x + s_attn`` (or from ``x`` when the branches are parallel) — what ``find_blocks`` promises per block."""

from __future__ import annotations

import dataclasses

import torch

TINY = {"hidden_size": 32, "n_embd": 32, "d_model": 32, "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2,
        "num_attention_heads": 4, "n_head": 4, "num_key_value_heads": 4, "intermediate_size": 48, "ffn_dim": 48,
        "n_inner": 48, "head_dim": 8, "vocab_size": 64, "max_position_embeddings": 64, "n_positions": 64,
        "num_experts": 2, "num_local_experts": 2, "n_routed_experts": 2, "num_experts_per_tok": 1,
        "moe_intermediate_size": 16, "rotary_dim": 4, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1,
        "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "kv_lora_rank": 16, "q_lora_rank": 16,
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
#: what a model type needs beyond :data:`TINY`: MiMo-V2-Flash's sliding layers want grouped keys and values; Bamba's
#: Mamba heads must divide its expanded width; the hybrid stacks get one layer of each mixer (layer 0 a state-space
#: or convolution block, layer 1 attention)
PER_TYPE = {"gpt_neo": {"attention_types": [[["global", "local"], 1]]}, "mimo_v2_flash": {"num_key_value_heads": 2},
            "bamba": {"mamba_n_heads": 4, "mamba_d_head": 16, "attn_layer_indices": [1]},
            "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
            "lfm2": {"full_attn_idxs": [1], "layer_types": ["conv", "full_attention"]},
            "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
            # Mamba's residual_in_fp32 rounds a float64 stream to float32 before the add; Mamba-2's heads must
            # tile its expanded width (2 · 32 = 8 heads of 8)
            "mamba": {"residual_in_fp32": False}, "falcon_mamba": {"residual_in_fp32": False},
            "mamba2": {"residual_in_fp32": False, "num_heads": 8, "n_groups": 1},
            # Nemotron-H: one block of each mixer kind (Mamba-2, attention, MLP, experts)
            "nemotron_h": {"layers_block_type": ["linear_attention", "full_attention", "mlp", "moe"],
                           "num_hidden_layers": 4}}


def _tiny_kwargs(config_cls) -> dict:
    fields = dataclasses.fields(config_cls) if dataclasses.is_dataclass(config_cls) else ()
    names = {f.name for f in fields} | set(getattr(config_cls, "attribute_map", {}) or {})
    kwargs = {k: v for k, v in TINY.items() if k in names}
    default = config_cls()
    depth = getattr(default, "num_hidden_layers", None)
    for f in fields:
        value = getattr(default, f.name, None)
        if isinstance(depth, int) and depth > 2 and isinstance(value, (list, tuple)) and len(value) == depth \
                and f.name not in kwargs:
            other = [v for v in value if v != value[0]]
            kwargs[f.name] = type(value)([value[0], other[0]] if other else value[:2])
    return kwargs


def tiny_causal_lm(model_type: str):
    """``(model class name, model)``: the causal LM transformers maps ``model_type`` to, tiny, float64, in evaluation,
    its norm weights drawn from U(0.5, 1.5) so that a skipped or misplaced norm shows, and any weight matrix initialised
    to zero drawn from N(0, 0.02²) so that its branch is not zero."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
    config_cls = getattr(transformers, CONFIG_MAPPING_NAMES[model_type])
    own = getattr(model_cls, "config_class", None)
    config_cls = own if isinstance(own, type) else config_cls
    config = config_cls(**{**_tiny_kwargs(config_cls), **PER_TYPE.get(model_type, {})}, experts_implementation="eager")
    torch.manual_seed(0)
    model = model_cls(config).double().eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
            elif param.dim() >= 2 and not param.is_meta and not param.any():  # xLSTM zero-initialises an output layer
                param.normal_(0.0, 0.02)
    return model_cls.__name__, model


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def branch_errors(probes, forward) -> list[tuple[float, float, float]]:
    """Per block: ``(max |y − (x + s₁ + s₂)|, max |stream₂ − expected|, min(max |s₁|, max |s₂|))`` (a block of one
    branch: ``(max |y − (x + s₁)|, 0, max |s₁|)``) after one call of
    ``forward()`` (each branch output times its gain — a copy, so a layer adding into it in place afterwards, as
    Falcon's does, is not seen —, reshaped to the stream's shape)."""
    seen: dict = {}
    handles = []
    for index, probe in enumerate(probes):
        handles.append(probe.module.register_forward_pre_hook(
            lambda m, a, k, i=index: seen.__setitem__((i, "x"), a[0] if a else k["hidden_states"]), with_kwargs=True))
        handles.append(probe.module.register_forward_hook(lambda m, a, o, i=index: seen.__setitem__((i, "y"),
                                                                                                   _first(o))))
        for branch in probe.branches:
            handles.append(branch.output_module.register_forward_hook(
                lambda m, a, o, i=index, b=branch.name, g=branch.output_gain: seen.__setitem__(
                    (i, b), _first(o) * g() if g is not None else _first(o).clone())))
        stream = probe.branches[-1].stream_module
        if len(probe.branches) == 2 and stream is not None:
            handles.append(stream.register_forward_pre_hook(lambda m, a, i=index: seen.__setitem__((i, "stream"),
                                                                                                   a[0])))
    default = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)  # XGLM's eager attention builds its mask fill at the default dtype
        with torch.no_grad():
            forward()
    finally:
        torch.set_default_dtype(default)
        for handle in handles:
            handle.remove()
    errors = []
    for index, probe in enumerate(probes):
        x, y = seen[(index, "x")], seen[(index, "y")]
        s = [seen[(index, branch.name)].reshape(x.shape) for branch in probe.branches]
        parallel = len(s) == 1 or probe.branches[1].stream_module is None  # one branch: no second stream to check
        stream = seen.get((index, "stream"), x).reshape(x.shape)
        expected_stream = x if parallel else x + s[0]
        errors.append((float((y - (x + sum(s))).abs().max()), float((stream - expected_stream).abs().max()),
                       min(float(t.abs().max()) for t in s)))
    return errors
