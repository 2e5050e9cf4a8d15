"""The residual branches of Hugging Face causal-LM decoder layers: GPT-2, the Llama family, the parallel-branch layers
(GPT-J, Phi, Cohere, GPT-NeoX, StableLM, Falcon), OPT, BLOOM, MPT, and the post-norm layers (Gemma 2 / 3, OLMo 2 / 3,
EXAONE 4).

The first five are Pre-LN (OPT with ``do_layer_norm_before``), ``x ← x + F(norm(x))`` twice per layer (or
``x ← x + F_attn(n(x)) + F_mlp(n'(x))``), with the residual adds inside the layer's own ``forward``; each branch
ends in one linear layer, the exact place for LayerScale (see :class:`~layerscale.surgery.LayerScaledLinear`,
:class:`~layerscale.surgery.hf.scaled_conv1d.LayerScaledConv1D`):

* GPT-2 (``GPT2Block``): ``attn.c_proj`` and ``mlp.c_proj`` (transformers' ``Conv1D``), and
  ``crossattention.c_proj`` when the model has cross-attention; the stream enters the MLP branch at ``ln_2``;
* Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma, OLMo, Granite, SmolLM3 (``*DecoderLayer``, the same layout, read
  from each ``modeling_*.py`` of transformers 5.24): ``self_attn.o_proj`` and ``mlp.down_proj`` (``nn.Linear``);
  the stream enters the MLP branch at ``post_attention_layernorm``. Phi-3 adds a dropout after each branch (an
  identity in evaluation; per element, so it commutes with a per-channel γ), Granite multiplies each branch by the
  scalar ``residual_multiplier`` (also after ``o_proj`` / ``down_proj``), Qwen3's attention normalises queries and
  keys inside the branch, SmolLM3 switches RoPE off on some layers (``config.no_rope_layers``, kept in step with the
  layers by the block family);
* the layers whose attention and MLP read the same input (``x + F_attn(n(x)) + F_mlp(n'(x))``; a per-channel γ on
  each branch's last linear is LayerScale on each term): GPT-J (``GPTJBlock``: ``attn.out_proj``, ``mlp.fc_out``),
  Phi (``PhiDecoderLayer``: ``self_attn.dense``, ``mlp.fc2``), GPT-NeoX / Pythia (``GPTNeoXLayer``:
  ``attention.dense``, ``mlp.dense_4h_to_h``; sequential without ``use_parallel_residual``), Cohere / Cohere 2 and
  StableLM (``self_attn.o_proj``, ``mlp.down_proj``; a StableLM without ``use_parallel_residual`` is sequential),
  Falcon (``FalconDecoderLayer``: ``self_attention.dense``, ``mlp.dense_4h_to_h``; sequential in Falcon-RW, with
  neither ``parallel_attn`` nor ``new_decoder_architecture``; it adds the attention output into the MLP's output in
  place, after γ has scaled it); dropouts after the branches commute with γ;
* OPT (``OPTDecoderLayer``: ``self_attn.out_proj``, ``fc2``), BLOOM (``BloomBlock``: ``self_attention.dense``,
  ``mlp.dense_4h_to_h``, before the residual add their modules do themselves) and MPT (``MptBlock``:
  ``attn.out_proj``, ``ffn.down_proj``, before the add its MLP does itself).

The paths of the layers named otherwise than Llama's are read from one table,
:data:`~layerscale.diagnostics.hf_layer_layouts.HF_DECODER_LAYOUTS`, which discovery reads too; configurations that
are not a residual stack (OPT-350m's Post-LN, ...) take no γ
(:func:`~layerscale.diagnostics.hf_layer_layouts.unsupported_reason`).

Gemma 2 / 3, OLMo 2 / 3 and EXAONE 4 normalise each branch's output after its last linear ("sandwich" or
post-norm layers, ``x ← x + g ⊙ n(F(·))`` with ``n`` the RMS normalisation and ``g`` the norm's per-channel gain;
read from each ``modeling_*.py`` of transformers 5.24): a scale in that linear would be undone by the norm, so they
take no extra γ and are not in :data:`HF_DECODER_LAYERS`. Their layers are still a residual stack
(:data:`HF_POST_NORM_DECODER_LAYERS`) whose blocks can be removed, and the post-norm's gain ``g`` already is a
per-channel scale on the branch's output — the place of LayerScale's γ (CaiT, eq. 1) — so a new block starts as the
identity at ``g = 0`` (:func:`post_norm_gains`; Gemma's norms multiply by ``1 + weight``, the others by ``weight``).

Mixture-of-experts decoders (Mixtral, Qwen2 / Qwen3 MoE, OLMoE, PhiMoE, gpt-oss, DeepSeek-V3, ERNIE 4.5 MoE, Granite
MoE; :data:`HF_MOE_DECODER_LAYERS`) keep Llama's residual layout, but their MLP branch sums routed experts with no
single output layer: their layers can be removed; γ is not retrofitted. So can the layers of the hybrid stacks of
Qwen3-Next and Qwen3.5 (:data:`HF_HYBRID_DECODER_LAYERS`), whose linear-attention layers have no single output layer
either, and the blocks of Mamba, Mamba-2, Falcon Mamba and Nemotron-H (:data:`HF_STATE_SPACE_DECODER_LAYERS`), one
branch each, whose Mamba mixers' output projection a fused kernel may apply without calling it.

The classes are looked up only when transformers is already imported (:func:`~layerscale.surgery.peers.loaded_classes`).
"""

from __future__ import annotations

from typing import Callable

from torch import nn

from ...diagnostics.hf_layer_layouts import HF_DECODER_LAYOUTS, unsupported_reason
from ..peers import loaded_classes, loaded_table_classes
from .scaled_conv1d import LayerScaledConv1D
from ..scaled_linear import LayerScaledLinear

__all__ = ["HF_DECODER_LAYERS", "HF_HYBRID_DECODER_LAYERS", "HF_MOE_DECODER_LAYERS", "HF_POST_NORM_DECODER_LAYERS",
           "HF_STATE_SPACE_DECODER_LAYERS", "decoder_layer_types", "branch_outputs", "hybrid_decoder_layer_types",
           "moe_decoder_layer_types", "post_norm_decoder_layer_types", "post_norm_gains", "queue_hf_decoder_layer",
           "state_space_decoder_layer_types"]

#: transformers module -> decoder layer class, for every supported causal-LM family
HF_DECODER_LAYERS = {
    "transformers.models.gpt2.modeling_gpt2": "GPT2Block",
    "transformers.models.llama.modeling_llama": "LlamaDecoderLayer",
    "transformers.models.mistral.modeling_mistral": "MistralDecoderLayer",
    "transformers.models.qwen2.modeling_qwen2": "Qwen2DecoderLayer",
    "transformers.models.qwen3.modeling_qwen3": "Qwen3DecoderLayer",
    "transformers.models.phi3.modeling_phi3": "Phi3DecoderLayer",
    "transformers.models.gemma.modeling_gemma": "GemmaDecoderLayer",
    "transformers.models.olmo.modeling_olmo": "OlmoDecoderLayer",
    "transformers.models.granite.modeling_granite": "GraniteDecoderLayer",
    "transformers.models.smollm3.modeling_smollm3": "SmolLM3DecoderLayer",
    "transformers.models.gptj.modeling_gptj": "GPTJBlock",
    "transformers.models.phi.modeling_phi": "PhiDecoderLayer",
    "transformers.models.cohere.modeling_cohere": "CohereDecoderLayer",
    "transformers.models.cohere2.modeling_cohere2": "Cohere2DecoderLayer",
    "transformers.models.gpt_neox.modeling_gpt_neox": "GPTNeoXLayer",
    "transformers.models.stablelm.modeling_stablelm": "StableLmDecoderLayer",
    "transformers.models.opt.modeling_opt": "OPTDecoderLayer",
    "transformers.models.bloom.modeling_bloom": "BloomBlock",
    "transformers.models.falcon.modeling_falcon": "FalconDecoderLayer",
    "transformers.models.mpt.modeling_mpt": "MptBlock",
}

#: transformers module -> decoder layer class of the post-norm causal-LM families (module docstring): no γ; the
#: post-norm's gain is the branch scale
HF_POST_NORM_DECODER_LAYERS = {
    "transformers.models.gemma2.modeling_gemma2": "Gemma2DecoderLayer",
    "transformers.models.gemma3.modeling_gemma3": "Gemma3DecoderLayer",
    "transformers.models.olmo2.modeling_olmo2": "Olmo2DecoderLayer",
    "transformers.models.olmo3.modeling_olmo3": "Olmo3DecoderLayer",
    "transformers.models.exaone4.modeling_exaone4": "Exaone4DecoderLayer",
}


def decoder_layer_types() -> tuple[type, ...]:
    """The supported decoder layer classes whose transformers module is loaded."""
    return loaded_table_classes(HF_DECODER_LAYERS)


#: transformers module -> decoder layer class of the mixture-of-experts families (Llama's names and residual
#: layout, read from each ``modeling_*.py`` of transformers 5.24): the MLP branch routes each token to experts and
#: sums their outputs, with no single output layer for γ, so their layers can be removed but γ is not retrofitted
HF_MOE_DECODER_LAYERS = {
    "transformers.models.mixtral.modeling_mixtral": "MixtralDecoderLayer",
    "transformers.models.qwen2_moe.modeling_qwen2_moe": "Qwen2MoeDecoderLayer",
    "transformers.models.qwen3_moe.modeling_qwen3_moe": "Qwen3MoeDecoderLayer",
    "transformers.models.olmoe.modeling_olmoe": "OlmoeDecoderLayer",
    "transformers.models.phimoe.modeling_phimoe": "PhimoeDecoderLayer",
    "transformers.models.gpt_oss.modeling_gpt_oss": "GptOssDecoderLayer",
    "transformers.models.deepseek_v3.modeling_deepseek_v3": "DeepseekV3DecoderLayer",
    "transformers.models.ernie4_5_moe.modeling_ernie4_5_moe": "Ernie4_5_MoeDecoderLayer",
    "transformers.models.granitemoe.modeling_granitemoe": "GraniteMoeDecoderLayer",
}

#: transformers module -> decoder layer class of the hybrid stacks whose layers are either attention or linear
#: attention (``self_attn`` or ``linear_attn``, ``config.layer_types`` saying which, re-ordered with the layers by the
#: block family; read from ``modeling_qwen3_next.py``, ``modeling_qwen3_5.py``, ``modeling_qwen3_5_moe.py`` of
#: transformers 5.24): their layers can be removed; the linear-attention mixer's output is gated and normalised
#: inside it, not one linear layer for γ, so they are not grown
HF_HYBRID_DECODER_LAYERS = {
    "transformers.models.qwen3_next.modeling_qwen3_next": "Qwen3NextDecoderLayer",
    "transformers.models.qwen3_5.modeling_qwen3_5": "Qwen3_5DecoderLayer",
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe": "Qwen3_5MoeDecoderLayer",
}

#: post-norm layers whose RMSNorm multiplies by ``1 + weight`` (``Gemma2RMSNorm``, ``Gemma3RMSNorm``: weight 0 is the
#: unit gain); the others' (``Olmo2RMSNorm``, ``Olmo3RMSNorm``, ``Exaone4RMSNorm``) multiply by ``weight``
_GAIN_ONE_PLUS_WEIGHT = ("Gemma2DecoderLayer", "Gemma3DecoderLayer")


#: transformers module -> block class of the state-space models of one branch per block, ``x ← x + mixer(norm(x))``
#: (read from ``modeling_mamba.py``, ``modeling_mamba2.py``, ``modeling_falcon_mamba.py``, ``modeling_nemotron_h.py``
#: of transformers 5.24; Nemotron-H's mixer is a Mamba-2 layer, attention, an MLP or experts, as its
#: ``layers_block_type`` — its ``layer_types`` — says, re-ordered with the blocks): their blocks can be removed; not
#: grown: with the ``mamba-ssm`` kernels installed, a training forward computes a Mamba mixer's output projection inside
#: a fused kernel from ``out_proj.weight`` without calling ``out_proj``, so a γ there would be bypassed
HF_STATE_SPACE_DECODER_LAYERS = {
    "transformers.models.mamba.modeling_mamba": "MambaBlock",
    "transformers.models.mamba2.modeling_mamba2": "Mamba2Block",
    "transformers.models.falcon_mamba.modeling_falcon_mamba": "FalconMambaBlock",
    "transformers.models.nemotron_h.modeling_nemotron_h": "NemotronHBlock",
}


def post_norm_decoder_layer_types() -> tuple[type, ...]:
    """The post-norm decoder layer classes (:data:`HF_POST_NORM_DECODER_LAYERS`) whose transformers module is
    loaded."""
    return loaded_table_classes(HF_POST_NORM_DECODER_LAYERS)


def hybrid_decoder_layer_types() -> tuple[type, ...]:
    """The hybrid-stack decoder layer classes (:data:`HF_HYBRID_DECODER_LAYERS`) whose transformers module is
    loaded."""
    return loaded_table_classes(HF_HYBRID_DECODER_LAYERS)


def state_space_decoder_layer_types() -> tuple[type, ...]:
    """The state-space block classes (:data:`HF_STATE_SPACE_DECODER_LAYERS`) whose transformers module is loaded."""
    return loaded_table_classes(HF_STATE_SPACE_DECODER_LAYERS)


def moe_decoder_layer_types() -> tuple[type, ...]:
    """The mixture-of-experts decoder layer classes (:data:`HF_MOE_DECODER_LAYERS`) whose transformers module is
    loaded."""
    return loaded_table_classes(HF_MOE_DECODER_LAYERS)


def post_norm_gains(layer: nn.Module) -> list[tuple[nn.Parameter, float]]:
    """``[(weight, offset)]`` of a post-norm layer's two branch-output norms (``post_attention_layernorm``,
    ``post_feedforward_layernorm``): each branch's output is multiplied per channel by ``offset + weight``."""
    offset = 1.0 if type(layer).__name__ in _GAIN_ONE_PLUS_WEIGHT else 0.0
    names = ("post_attention_layernorm", "post_feedforward_layernorm")
    return [(getattr(layer, name).weight, offset) for name in names]


def _is_gpt2(layer: nn.Module) -> bool:
    return hasattr(layer, "ln_2") and hasattr(layer, "attn")


def branch_outputs(layer: nn.Module) -> list[tuple[str, str]]:
    """``[(branch, path of its output layer)]`` for a decoder layer: ``attn`` (then ``cross_attn`` when present)
    and ``mlp``, in forward order."""
    if _is_gpt2(layer):
        cross = [("cross_attn", "crossattention.c_proj")] if getattr(layer, "crossattention", None) is not None else []
        return [("attn", "attn.c_proj"), *cross, ("mlp", "mlp.c_proj")]
    layout = HF_DECODER_LAYOUTS.get(type(layer).__name__)
    if layout is None:
        return [("attn", "self_attn.o_proj"), ("mlp", "mlp.down_proj")]
    return [("attn", layout.attention_output), ("mlp", layout.mlp_output)]


def queue_hf_decoder_layer(path: str, layer: nn.Module, actions: list[Callable[[float], None]]) -> bool:
    """Queue, for :func:`~layerscale.surgery.add_layerscale`, a scale on each unscaled branch output of ``layer``."""
    reason = unsupported_reason(layer)
    if reason is not None:
        raise ValueError(f"cannot add LayerScale to {path}: {reason}")
    conv_types = loaded_classes("transformers.pytorch_utils", "Conv1D")
    for _, name in branch_outputs(layer):
        parent_name, _, attr = name.rpartition(".")
        parent = layer.get_submodule(parent_name)
        output = getattr(parent, attr)
        if isinstance(output, (LayerScaledLinear, LayerScaledConv1D)):
            continue
        if isinstance(output, nn.Linear):
            def add(value: float, parent=parent, attr=attr, output=output) -> None:
                setattr(parent, attr, LayerScaledLinear.wrap(output, value))
        elif conv_types and isinstance(output, conv_types):
            def add(value: float, parent=parent, attr=attr, output=output) -> None:
                setattr(parent, attr, LayerScaledConv1D.wrap(output, value))
        else:
            raise ValueError(f"cannot add LayerScale to {path}.{name}: a {type(output).__name__}, not the "
                             f"nn.Linear / Conv1D a {type(layer).__name__} has there")
        actions.append(add)
    return True
