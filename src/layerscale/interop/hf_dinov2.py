"""Hugging Face DINOv2 keys (``transformers`` ``Dinov2Model``; ``dinov2.`` prefix in task models).

Layout (transformers >= 5.18): ``embeddings.{cls_token, mask_token, position_embeddings,
patch_embeddings.projection}``, ``encoder.layer.{i}.{norm1, attention.{q,k,v,o}_proj, layer_scale1.lambda1, norm2,
mlp.fc1, mlp.fc2, layer_scale2.lambda1}``, ``layernorm``. transformers 4.x and 5.0–5.17 name the attention
``attention.attention.{query,key,value}`` and ``attention.output.dense`` (so do the checkpoints on the Hub, which
transformers >= 5.18 renames when ``from_pretrained`` reads them). Both names are read. Export writes the names of
the model the weights are for: the target model's own keys when there is one (``load_pretrained_into``), else
those of the installed transformers (the current names when it is not installed). Hugging Face keeps query, key
and value as three linears; ours is one packed ``qkv`` (rows q, then k, then v, each head-major), so they are
concatenated on import and split on export.

DINOv2's position embedding covers the class token too: load it into our ViT built with
``no_embed_class=False``. Hugging Face interpolates the position embedding whenever the image grid differs from the
stored one, so compare outputs at the configured ``image_size``. ``mask_token`` only serves masked-image
pre-training and has no counterpart in our ViT (dropped on import, written as zeros — its initial value — on
export); a model without LayerScale is written with ``lambda1 = 1`` (the same function); our classification
``head`` has no slot in ``Dinov2Model`` (dropped on export). The classifier of ``Dinov2ForImageClassification``
reads ``[cls; mean(patches)]`` and cannot become our ``head``: drop it explicitly (``drop=("classifier.",)``) to
convert the backbone. The SwiGLU variant (``use_swiglu_ffn``) is not supported.
"""

from __future__ import annotations

import functools
import math

import torch

from .rules import ConversionReport, Dropped, KeyFormat, Rule

L = "encoder.layer.{i}."
B = "blocks.{i}."
MASK_TOKEN = "embeddings.mask_token"


def _add_dinov2_keys(state_dict: dict[str, torch.Tensor], report: ConversionReport) -> None:
    """What ``Dinov2Model`` holds and our ViT may lack: ``mask_token`` (zeros, its initial value) and, for a model
    without LayerScale, each block's ``layer_scale{1,2}.lambda1`` (ones: ``x + 1 ⊙ F(x)`` is what the model
    computed; left out, transformers would fill them with the target config's ``layerscale_value``)."""
    cls = state_dict.get("embeddings.cls_token")
    if cls is not None and MASK_TOKEN not in state_dict:
        state_dict[MASK_TOKEN] = cls.new_zeros(1, cls.shape[-1])
        report.added.append((MASK_TOKEN, "zeros (Hugging Face's initial value; used only in masked pre-training)"))
    added = 0
    for key in [k for k in state_dict if k.startswith("encoder.layer.") and k.endswith(".norm1.weight")]:
        layer = key[: -len("norm1.weight")]
        for n in (1, 2):
            scale = f"{layer}layer_scale{n}.lambda1"
            if scale not in state_dict:
                state_dict[scale] = torch.ones_like(state_dict[key])
                added += 1
    if added:
        report.added.append((f"encoder.layer.{{i}}.layer_scale{{1,2}}.lambda1 ({added} tensors)",
                             "ones (the model has no LayerScale: γ = 1 computes what it did)"))


def _check_pos_embed(state_dict: dict[str, torch.Tensor]) -> None:
    pos = state_dict.get("pos_embed")
    if pos is None:
        return
    tokens = pos.shape[1]
    grid = math.isqrt(max(tokens - 1, 0))
    if pos.dim() != 3 or grid * grid != tokens - 1:
        raise ValueError(f"hf_dinov2 needs a position embedding over [cls; patches] (1 + a square number of "
                         f"tokens), got pos_embed of shape {tuple(pos.shape)}; build the ViT with "
                         f"no_embed_class=False")


@functools.lru_cache(maxsize=1)
def _installed_keys() -> tuple[str, ...] | None:
    """The state-dict keys of a tiny ``Dinov2Model`` of the installed transformers (built on the meta device:
    nothing allocated), or ``None`` when transformers is not installed."""
    try:
        from transformers import Dinov2Config, Dinov2Model
    except ImportError:
        return None
    config = Dinov2Config(hidden_size=4, num_hidden_layers=1, num_attention_heads=1, image_size=4, patch_size=4)
    with torch.device("meta"):
        return tuple(Dinov2Model(config).state_dict())


HF_DINOV2 = KeyFormat(
    name="hf_dinov2",
    description="Hugging Face Dinov2Model (encoder.layer.{i}.layer_scale1.lambda1; 'dinov2.' prefix stripped)",
    rules=(
        Rule("embeddings.cls_token", "cls_token"),
        Rule("embeddings.position_embeddings", "pos_embed"),
        Rule("embeddings.patch_embeddings.projection.{p}", "patch_embed.proj.{p}"),
        Rule(L + "norm1.{p}", B + "norm1.{p}"),
        Rule((L + "attention.q_proj.{p}", L + "attention.k_proj.{p}", L + "attention.v_proj.{p}"),
             B + "attn.qkv.{p}"),
        Rule(L + "attention.o_proj.{p}", B + "attn.proj.{p}"),
        Rule(L + "layer_scale1.lambda1", B + "ls1.gamma"),
        Rule(L + "norm2.{p}", B + "norm2.{p}"),
        Rule(L + "mlp.fc1.{p}", B + "mlp.fc1.{p}"),
        Rule(L + "mlp.fc2.{p}", B + "mlp.fc2.{p}"),
        Rule(L + "layer_scale2.lambda1", B + "ls2.gamma"),
        Rule("layernorm.{p}", "norm.{p}"),
    ),
    legacy_rules=(
        Rule((L + "attention.attention.query.{p}", L + "attention.attention.key.{p}",
              L + "attention.attention.value.{p}"), B + "attn.qkv.{p}"),
        Rule(L + "attention.output.dense.{p}", B + "attn.proj.{p}"),
    ),
    legacy_names="transformers < 5.18",
    installed_keys=_installed_keys,
    import_drops=(Dropped(MASK_TOKEN, "masked-image pre-training token, no counterpart in our ViT"),),
    export_drops=(Dropped("head.{p}", "Dinov2Model has no classification head"),),
    strip_prefixes=("dinov2.",),
    export_hook=_add_dinov2_keys,
    check=_check_pos_embed,
)
