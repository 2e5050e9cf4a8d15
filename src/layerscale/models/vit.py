"""Vision Transformer in the DeiT III style (Touvron et al. 2022, "DeiT III: Revenge of the ViT") with LayerScale.

``patch_embed → (+ pos_embed on patches) → [cls; patches] → blocks → norm → head(cls)``. State-dict keys equal
timm's ``VisionTransformer`` (``cls_token``, ``pos_embed``, ``patch_embed.proj``, ``blocks.{i}.{norm1,attn,ls1,
norm2,mlp,ls2}``, ``norm``, ``head``), so timm ViT / DeiT III checkpoints load by name.
"""

from __future__ import annotations

import torch
from torch import nn

from .hub_mixin import HubMixin
from ..layers.block import Block
from ..layers.drop_path import drop_path_rates
from ..layers.patch_embed import PatchEmbed
from .checkpointing import GradCheckpointing, check_grad_checkpointing
from .class_token_path import class_token_logits, class_token_path_applies
from .init import init_transformer_weights
from .timm_api import (
    IMAGENET_DEFAULT_MEAN,
    IMAGENET_DEFAULT_STD,
    TimmClassifierAPI,
    check_global_pool,
    classifier_head,
)
from .trunk_args import resolve_trunk_args
from .validation import check_bool, check_patch, check_positive_int

__all__ = ["VisionTransformer"]


class VisionTransformer(GradCheckpointing, TimmClassifierAPI, HubMixin, nn.Module):
    """A ViT classifier whose blocks use the residual method ``residual`` (default LayerScale).

    ``init_value=None`` takes the CaiT depth rule (:func:`layerscale.init_value_for_depth`); ``no_embed_class=True``
    (DeiT III) adds the position embedding to the patches only, before the class token is prepended.
    ``norm="rmsnorm"`` builds every norm as RMSNorm instead of LayerNorm (``docs/methods.md``).
    ``grad_checkpointing=True`` recomputes each block in the backward (see :meth:`set_grad_checkpointing`).
    ``global_pool``: what the head reads — ``"token"`` (the class token), ``"avg"`` (the mean of the normalised
    patch tokens, as timm's ``reset_classifier(n, "avg")``; timm's constructor with ``"avg"`` normalises after
    pooling instead) or ``""`` (every token). ``dynamic_img_size=True``: any image size the patch divides, the
    position embedding resampled to its grid (timm's ``dynamic_img_size``).
    timm's interface (``pretrained_cfg``, ``no_weight_decay``, ``forward_intermediates``, ``reset_classifier``,
    ``num_classes=0`` for features, ``init_values``) comes from :class:`~layerscale.models.timm_api.TimmClassifierAPI`,
    ``save_pretrained`` / ``from_pretrained`` from :class:`~layerscale.models.hub_mixin.HubMixin`.
    Bad arguments are a one-line ``ValueError`` at construction: the flags (``qkv_bias``, ``no_embed_class``,
    ``dynamic_img_size``, ``grad_checkpointing``) must be True or False, the shared numbers are checked by
    :func:`~layerscale.models.trunk_args.resolve_trunk_args` (``norm_eps`` a finite number > 0, rates in [0, 1)).
    """

    _cfg_defaults = dict(interpolation="bicubic", crop_pct=0.875, mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD,
                         pool_size=None, first_conv="patch_embed.proj", classifier="head")
    _intermediate_prefix_tokens = 1

    def __init__(self, img_size: int = 224, patch_size: int = 16, in_chans: int = 3, num_classes: int = 1000,
                 embed_dim: int = 384, depth: int = 12, num_heads: int = 6, mlp_ratio: float = 4.0,
                 qkv_bias: bool = True, residual: str = "layerscale", init_value: float | None = None,
                 ls_placement: str = "both", no_embed_class: bool = True, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0, drop_path_schedule: str = "linear",
                 norm_eps: float = 1e-6, grad_checkpointing: bool = False, init_values: float | None = None,
                 norm: str = "layernorm", global_pool: str = "token", dynamic_img_size: bool = False) -> None:
        super().__init__()
        self.grad_checkpointing = check_grad_checkpointing(grad_checkpointing)
        check_positive_int("in_chans", in_chans)
        check_patch(img_size, patch_size)
        qkv_bias, no_embed_class = check_bool("qkv_bias", qkv_bias), check_bool("no_embed_class", no_embed_class)
        dynamic_img_size = check_bool("dynamic_img_size", dynamic_img_size)
        init_value, method, norm_layer = resolve_trunk_args(
            depth=depth, embed_dim=embed_dim, num_heads=num_heads, drop_rate=drop_rate, residual=residual,
            norm=norm, norm_eps=norm_eps, init_value=init_value, init_values=init_values,
            attn_drop_rate=attn_drop_rate, mlp_ratio=mlp_ratio)
        self.num_classes, self.embed_dim, self.depth = num_classes, embed_dim, depth
        self.residual, self.no_embed_class = method.name, no_embed_class
        self.global_pool, self.dynamic_img_size = check_global_pool(global_pool), dynamic_img_size
        self.residual_method = method  # its stream hooks (multi-stream methods) and prepare_model (Admin)
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim, strict_img_size=not dynamic_img_size)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + (0 if no_embed_class else 1), embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        rates = drop_path_rates(depth, drop_path_rate, drop_path_schedule)
        self.blocks = nn.Sequential(*[
            Block(embed_dim, num_heads, mlp_ratio, qkv_bias, residual=method, index=i + 1, depth=depth,
                  init_value=init_value, ls_placement=ls_placement, norm_layer=norm_layer, drop=drop_rate,
                  attn_drop=attn_drop_rate, drop_path=rates[i])
            for i in range(depth)
        ])
        self.norm = method.final_norm(norm_layer, embed_dim)
        self.stream_reduce = method.stream_reduction(embed_dim)  # None but for AttnRes's output aggregation
        self.head_drop = nn.Dropout(drop_rate)
        self.head = classifier_head(embed_dim, num_classes)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise every parameter (usable after ``to_empty()`` from the meta device)."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        init_transformer_weights(self)
        self.residual_method.prepare_model(self)

    def _embed_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W) -> (B, 1 + N, D)``: ``[cls; patches]`` with the position embedding, before the blocks."""
        pos_embed = self._position_embedding(self.patch_embed.feature_grid(x))
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        if self.no_embed_class:
            x = torch.cat((cls, x + pos_embed), dim=1)
        else:
            x = torch.cat((cls, x), dim=1) + pos_embed
        return self.pos_drop(x)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W) -> (B, 1 + N, D)`` normalised tokens."""
        stream = self._run_blocks(self.blocks, self.residual_method.expand_stream(self._embed_tokens(x)))
        x = self._reduce_stream(stream)
        return x if self.norm is None else self.norm(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits ``(B, num_classes)``.

        Where it is exact (:func:`~layerscale.models.class_token_path.class_token_path_applies`), the last block is
        computed for the class token only, the one row the head reads; ``model.class_token_path = False`` forces
        the full path, which :meth:`forward_features` always takes.
        """
        if class_token_path_applies(self):
            return class_token_logits(self, self._embed_tokens(x))
        return self.forward_head(self.forward_features(x))
