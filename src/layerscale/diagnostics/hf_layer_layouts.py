"""Where the two residual branches of a Hugging Face decoder layer are, for the layer classes whose names differ from
Llama's: the one statement that discovery (:mod:`layerscale.diagnostics.discovery`, which observes the branches)
and surgery (:mod:`layerscale.surgery.hf.hf_decoder_layers`, which puts γ in their last linears) both read.

Each layer computes ``x ← x + s_attn`` then ``x ← x + s_mlp`` (or, with parallel branches, ``x ← x + s_attn +
s_mlp`` with both read from the same ``x``); a :class:`DecoderLayout` names, inside the layer, the module whose output
is each ``s``, the last linear of each branch, and the module whose input is the stream entering the MLP branch.
Read from each layer's ``modeling_*.py`` of transformers 5.24:

* parallel branches (GPT-J, Phi, Cohere / Cohere 2, GPT-NeoX / Pythia, StableLM, Falcon): both branches read the
  layer's input. GPT-NeoX and StableLM are parallel only with ``use_parallel_residual`` (Pythia: yes), Falcon with
  ``parallel_attn`` or ``new_decoder_architecture`` (7B, 40B, Falcon 2; not Falcon-RW); otherwise their MLP branch
  reads ``x + s_attn`` at ``post_attention_layernorm``. Falcon adds the attention output into the MLP's output tensor
  in place (``mlp_output += attention_output``), so a reader of ``s_mlp`` must take it in its hook, not keep it;
* OPT (``OPTDecoderLayer``, Pre-LN with ``do_layer_norm_before``): its MLP is two linears of the layer itself,
  ``fc2(act(fc1(final_layer_norm(x))))``, on the tokens flattened to ``(batch · tokens, width)``;
* BLOOM (``BloomBlock``): its attention and MLP modules add the residual themselves (``dropout_add``), so ``s`` is the
  output of their last linears, ``self_attention.dense`` and ``mlp.dense_4h_to_h``; so does MPT's MLP (``MptBlock``:
  ``ffn(norm_2(x), x)`` returns ``x + down_proj(·)``), so its ``s_mlp`` is the output of ``ffn.down_proj``;
* read by discovery only: CodeGen (parallel, as GPT-J), BioGPT and XGLM (as OPT, without the flattening), Apertus
  (``feedforward_layernorm`` before the MLP), Llama 4 (``feed_forward``, dense or experts), JetMoE, the ModernBERT
  decoder, VaultGemma, RecurrentGemma, xLSTM, the hybrid stacks of Jamba, Bamba and LFM2, and the sandwich-norm
  layers of GLM-4 / Kolibri (``post_self_attn_layernorm``, ``post_mlp_layernorm``; ``post_attention_layernorm`` is
  the norm *before* the MLP there), AFMoE (``post_attention_layernorm``, ``pre_mlp_layernorm``,
  ``post_mlp_layernorm``), where a name-matched reading took the raw attention output for ``s``, and LFM3;
* blocks of one branch, ``x ← x + mixer(norm(x))`` (Mamba, Mamba-2, Falcon Mamba; Nemotron-H, whose mixers are Mamba-2
  layers, attention, MLPs or experts, one per block): read by the depth analysis (block input and output); the
  per-branch diagnostics, whose records hold an attention and an MLP branch per block, refuse them.

Not every configuration of these classes is a residual stack ``x ← x + s``: :func:`unsupported_reason` says which is
not, and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

__all__ = ["CHECKED_GENERIC_LAYERS", "DecoderLayout", "HF_DECODER_LAYOUTS", "mlp_stream_path", "unsupported_reason"]

#: The Hugging Face layer classes that discovery's generic layouts (GPT-2's, Llama's and ViT's names; the post-norm
#: names of Gemma 2) read and whose reading was checked: at each class's config defaults (and the options its tests
#: name), every block's branch outputs add up to what the block does, ``y = x + s_attn + s_mlp``, and the stream
#: found entering the MLP branch is ``x + s_attn`` (``tests/diagnostics/test_hf_checked_layers.py``, transformers
#: 5.24, one model type per class at least). Those layouts match layers by attribute names alone, and an audit of
#: every causal LM of transformers 5.24 (2026-12-07) found twelve that they match but misread — sandwich norms under
#: other names (GLM-4, AFMoE), a depth scale on each branch (MiniCPM3), post-norms on by default (HyperCLOVA X),
#: Post-LN (OpenAI GPT), hyper-connections (DeepSeek-V4), ... — so a layer of a class not listed here is still found
#: (the block-level tools read only its input and output) but flagged unchecked (``BlockProbe.checked``), and the
#: per-branch diagnostics refuse it.
CHECKED_GENERIC_LAYERS = frozenset({
    # GPT-2 names (``ln_2``, ``attn``, ``mlp``)
    "GPT2Block", "GPTBigCodeBlock", "GPTNeoBlock",
    # Llama names (``post_attention_layernorm``, ``self_attn``, ``mlp``), dense
    "LlamaDecoderLayer", "MistralDecoderLayer", "MinistralDecoderLayer", "Ministral3DecoderLayer",
    "Qwen2DecoderLayer", "Qwen3DecoderLayer", "Phi3DecoderLayer", "Phi4MultimodalDecoderLayer", "GemmaDecoderLayer",
    "OlmoDecoderLayer", "GraniteDecoderLayer", "GraniteSWADecoderLayer", "SmolLM3DecoderLayer", "ArceeDecoderLayer",
    "AriaTextDecoderLayer", "BitNetDecoderLayer", "CwmDecoderLayer", "DiffLlamaDecoderLayer", "DogeDecoderLayer",
    "Emu3DecoderLayer", "Ernie4_5DecoderLayer", "FlintDecoderLayer", "GlmDecoderLayer", "HeliumDecoderLayer",
    "HunYuanDenseV1DecoderLayer", "Jais2DecoderLayer", "MellumDecoderLayer", "NanoChatDecoderLayer",
    "NemotronDecoderLayer", "PersimmonDecoderLayer", "SeedOssDecoderLayer", "Starcoder2DecoderLayer",
    "YoutuDecoderLayer", "ZayaDecoderLayer", "KimiLinearDecoderLayer", "LagunaDecoderLayer", "SolarOpenDecoderLayer",
    "AXK1DecoderLayer", "AXK2DecoderLayer", "BailingHybridDecoderLayer", "HYV3DecoderLayer", "MoshiDecoderLayer",
    # Llama names, hybrid stacks whose linear-attention layers name their token mixer ``linear_attn``
    "Qwen3NextDecoderLayer", "Qwen3_5DecoderLayer", "Qwen3_5MoeDecoderLayer", "LaraMiniDecoderLayer",
    "OlmoHybridLinearAttentionDecoderLayer",
    # Llama names, mixture of experts (``mlp`` or Granite MoE's ``block_sparse_moe``)
    "MixtralDecoderLayer", "Qwen2MoeDecoderLayer", "Qwen3MoeDecoderLayer", "OlmoeDecoderLayer", "PhimoeDecoderLayer",
    "GptOssDecoderLayer", "DeepseekV2DecoderLayer", "DeepseekV3DecoderLayer", "DeepseekV32DecoderLayer",
    "Ernie4_5_MoeDecoderLayer", "ExaoneMoeDecoderLayer", "Glm4MoeDecoderLayer", "Glm4MoeLiteDecoderLayer",
    "GlmMoeDsaDecoderLayer", "GraniteMoeDecoderLayer", "GraniteMoeSWADecoderLayer", "GraniteMoeSharedDecoderLayer",
    "HunYuanMoEV1DecoderLayer", "MiMoV2FlashDecoderLayer", "MiniMaxM2DecoderLayer", "MiniMaxM3VLDecoderLayer",
    # post-norm names (``post_attention_layernorm`` and ``post_feedforward_layernorm`` on each branch's output)
    "Gemma2DecoderLayer", "Gemma3DecoderLayer", "Olmo2DecoderLayer", "Olmo3DecoderLayer", "Exaone4DecoderLayer",
    "FlexOlmoDecoderLayer", "OlmoHybridAttentionDecoderLayer",
    # ViT names (``layernorm_after``, ``attention``, ``mlp``)
    "ViTLayer", "DeiTLayer",
})


@dataclass(frozen=True)
class DecoderLayout:
    """Paths inside one decoder layer: ``attention`` / ``mlp``, the modules whose outputs are the branch outputs
    ``s`` (``attention`` may list alternatives separated by ``|``, of which a layer holds one: the token mixer of a
    hybrid stack's layer, attention or a state-space / convolution block); ``attention_output`` / ``mlp_output``,
    each branch's last linear (the place of γ; ``None`` where no one linear is: a norm after it, a mixture of
    experts); ``mlp_stream``, the module whose first input is the stream entering the MLP branch (``None``: the
    layer's own input, when the branches run in parallel). A block of one branch (a state-space model's
    ``x ← x + mixer(norm(x))``) has ``mlp = None``: its one branch is ``attention``, whichever kind of mixer it is."""

    attention: str
    attention_output: str | None
    mlp: str | None
    mlp_output: str | None
    mlp_stream: str | None


_PARALLEL_LLAMA_NAMES = DecoderLayout("self_attn", "self_attn.o_proj", "mlp", "mlp.down_proj", None)
_APERTUS = DecoderLayout("self_attn", "self_attn.o_proj", "mlp", "mlp.down_proj", "feedforward_layernorm")
_JAMBA = DecoderLayout("self_attn|mamba", None, "feed_forward", None, "pre_ff_layernorm")
_MIXER_ONLY = DecoderLayout("mixer", None, None, None, None)
_GLM4_SANDWICH = DecoderLayout("post_self_attn_layernorm", None, "post_mlp_layernorm", None, "post_attention_layernorm")

#: decoder layer class name → its layout (module docstring); a class not listed has Llama's or GPT-2's names
HF_DECODER_LAYOUTS = {
    "GPTJBlock": DecoderLayout("attn", "attn.out_proj", "mlp", "mlp.fc_out", None),
    "PhiDecoderLayer": DecoderLayout("self_attn", "self_attn.dense", "mlp", "mlp.fc2", None),
    "CohereDecoderLayer": _PARALLEL_LLAMA_NAMES,
    "Cohere2DecoderLayer": _PARALLEL_LLAMA_NAMES,
    "GPTNeoXLayer": DecoderLayout("attention", "attention.dense", "mlp", "mlp.dense_4h_to_h", None),
    "StableLmDecoderLayer": _PARALLEL_LLAMA_NAMES,
    "OPTDecoderLayer": DecoderLayout("self_attn", "self_attn.out_proj", "fc2", "fc2", "final_layer_norm"),
    "BloomBlock": DecoderLayout("self_attention.dense", "self_attention.dense", "mlp.dense_4h_to_h",
                                "mlp.dense_4h_to_h", "post_attention_layernorm"),
    "FalconDecoderLayer": DecoderLayout("self_attention", "self_attention.dense", "mlp", "mlp.dense_4h_to_h", None),
    "MptBlock": DecoderLayout("attn", "attn.out_proj", "ffn.down_proj", "ffn.down_proj", "norm_2"),
    # read by discovery, not retrofitted with γ (not in surgery's tables)
    "CodeGenBlock": DecoderLayout("attn", "attn.out_proj", "mlp", "mlp.fc_out", None),
    "BioGptDecoderLayer": DecoderLayout("self_attn", "self_attn.out_proj", "fc2", "fc2", "final_layer_norm"),
    "ApertusDecoderLayer": _APERTUS,
    "Llama4TextDecoderLayer": DecoderLayout("self_attn", "self_attn.o_proj", "feed_forward", None,
                                            "post_attention_layernorm"),
    # sandwich norms under other names than Gemma 2's: ``s`` is the output of the norm after each branch
    "Glm4DecoderLayer": _GLM4_SANDWICH,
    "Kolibri1DecoderLayer": _GLM4_SANDWICH,
    "AfmoeDecoderLayer": DecoderLayout("post_attention_layernorm", None, "post_mlp_layernorm", None,
                                       "pre_mlp_layernorm"),
    # Pre-LN under other names
    "Apertus1p5TextDecoderLayer": _APERTUS,
    "JetMoeDecoderLayer": DecoderLayout("self_attention", None, "mlp", None, "post_attention_layernorm"),
    "ModernBertDecoderLayer": DecoderLayout("attn", None, "mlp", None, "mlp_norm"),
    "VaultGemmaDecoderLayer": DecoderLayout("self_attn", "self_attn.o_proj", "mlp", "mlp.down_proj",
                                            "pre_feedforward_layernorm"),
    "RecurrentGemmaDecoderLayer": DecoderLayout("temporal_block", None, "mlp_block", None, "channel_pre_norm"),
    # hybrid stacks: each layer's token mixer is attention or a state-space / convolution block
    "JambaAttentionDecoderLayer": _JAMBA,
    "JambaMambaDecoderLayer": _JAMBA,
    "BambaDecoderLayer": _JAMBA,
    "Lfm2DecoderLayer": DecoderLayout("self_attn|conv", None, "feed_forward", None, "ffn_norm"),
    # LFM3: ``post_operator_norm`` / ``post_ffn_norm`` normalise each branch's output (identities without
    # ``use_sandwich_norm``), so ``s`` is their output either way
    "Lfm3DecoderLayer": DecoderLayout("post_operator_norm", None, "post_ffn_norm", None, "ffn_norm"),
    # OPT's names without the flattening; a third, cross-attention branch runs only given encoder states
    "XGLMDecoderLayer": DecoderLayout("self_attn", "self_attn.out_proj", "fc2", "fc2", "final_layer_norm"),
    # xLSTM (transformers' own mLSTM block): the mLSTM layer, then the feed-forward after ``norm_ffn``
    "xLSTMBlock": DecoderLayout("mlstm_layer", None, "ffn", None, "norm_ffn"),
    # one branch per block, ``x ← x + mixer(norm(x))``: Mamba, Mamba-2, Falcon Mamba, and Nemotron-H, whose block's
    # mixer is a Mamba-2 layer, attention, an MLP or experts
    "MambaBlock": _MIXER_ONLY,
    "Mamba2Block": _MIXER_ONLY,
    "FalconMambaBlock": _MIXER_ONLY,
    "NemotronHBlock": _MIXER_ONLY,
}


def mlp_stream_path(layer: nn.Module, layout: DecoderLayout) -> str | None:
    """The path of the module whose input is the stream entering ``layer``'s MLP branch (``None``: the layer's
    input): the layout's, except in the layers whose branches run in parallel only under an option — a GPT-NeoX or
    StableLM layer built without ``use_parallel_residual``, a Falcon layer with neither ``parallel_attn`` nor
    ``new_decoder_architecture`` (Falcon-RW) — whose MLP branch reads ``x + s_attn`` at
    ``post_attention_layernorm``."""
    if layout.mlp_stream is None and (getattr(layer, "use_parallel_residual", True) is False
                                      or _falcon_sequential(layer)):
        return "post_attention_layernorm"
    return layout.mlp_stream


def _falcon_sequential(layer: nn.Module) -> bool:
    """A ``FalconDecoderLayer`` computing ``x ← x + s_attn`` before its MLP (``modeling_falcon.py``,
    ``FalconDecoderLayer.forward``: neither ``new_decoder_architecture`` nor ``parallel_attn``)."""
    config = getattr(layer, "config", None)
    return type(layer).__name__ == "FalconDecoderLayer" and config is not None and not (
        getattr(config, "new_decoder_architecture", False) or getattr(config, "parallel_attn", True))


def unsupported_reason(layer: nn.Module) -> str | None:
    """Why ``layer`` (of a class in :data:`HF_DECODER_LAYOUTS`) is not a residual layer whose branch outputs and γ
    can be read and placed as its layout says, or ``None`` when it is:

    * OPT with ``do_layer_norm_before=False`` (OPT-350m) is Post-LN: each sum is normalised, ``x ← n(x + s)``, so
      the stream is not ``x + s`` and a branch at γ = 0 is not the identity;
    * BLOOM with ``apply_residual_connection_post_layernorm`` adds each branch to the normalised stream instead;
    * BLOOM with ``pretraining_tp > 1`` and ``slow_but_exact`` multiplies by slices of the last linears' weights
      without calling those modules: neither a hook nor a γ there would see the branch."""
    name = type(layer).__name__
    if name == "OPTDecoderLayer" and getattr(layer, "do_layer_norm_before", True) is False:
        return ("OPTDecoderLayer with do_layer_norm_before=False is Post-LN (x <- LayerNorm(x + F(x))), not a "
                "residual stream x <- x + F(x)")
    if name == "BloomBlock":
        if getattr(layer, "apply_residual_connection_post_layernorm", False):
            return ("BloomBlock with apply_residual_connection_post_layernorm=True adds each branch to the "
                    "normalised stream, not a residual stream x <- x + F(x)")
        attention = getattr(layer, "self_attention", None)
        if getattr(attention, "pretraining_tp", 1) > 1 and getattr(attention, "slow_but_exact", False):
            return ("BloomBlock with pretraining_tp > 1 and slow_but_exact=True computes its branch outputs from "
                    "slices of the weights without calling its output layers (set slow_but_exact=False)")
    return None
