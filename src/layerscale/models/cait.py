"""CaiT: Class-Attention in Image Transformers (Touvron et al. 2021, "Going deeper with Image Transformers").

``patch_embed → + pos_embed (patches only) → depth × [talking-heads self-attention block] →
depth_token_only × [class-attention block updating only the class token] → norm([cls; patches]) → head(cls)``.
Every block uses LayerScale by default (class-attention blocks too), stochastic depth is the same rate in every
self-attention block and zero in the class-attention blocks. Keys follow timm's ``Cait`` except the scales, which
are ``ls1.gamma`` / ``ls2.gamma`` here and ``gamma_1`` / ``gamma_2`` there (:mod:`layerscale.interop` maps them).
"""

from __future__ import annotations

import torch
from torch import nn

from .hub_mixin import HubMixin
from ..layers.block import Block, ClassAttentionBlock
from ..layers.drop_path import drop_path_rates
from ..layers.layer_scale import init_value_for_depth
from ..layers.patch_embed import PatchEmbed
from .checkpointing import GradCheckpointing, check_grad_checkpointing
from .init import init_transformer_weights
from .timm_api import (
    IMAGENET_DEFAULT_MEAN,
    IMAGENET_DEFAULT_STD,
    TimmClassifierAPI,
    check_global_pool,
    classifier_head,
)
from .trunk_args import resolve_trunk_args
from .validation import MAX_DEPTH, check_bool, check_patch, check_positive_int

__all__ = ["CaiT"]


class CaiT(GradCheckpointing, TimmClassifierAPI, HubMixin, nn.Module):
    """CaiT classifier. ``init_value=None`` takes the depth rule of the self-attention depth.

    ``norm="rmsnorm"`` builds every norm as RMSNorm instead of LayerNorm (``docs/methods.md``).
    ``grad_checkpointing=True`` recomputes each block (class-attention blocks too) in the backward.
    ``global_pool`` (``"token"``, ``"avg"``, ``""``) and ``dynamic_img_size`` as in
    :class:`~layerscale.models.vit.VisionTransformer` (timm's ``Cait`` has no ``dynamic_img_size``). timm's
    interface comes from :class:`~layerscale.models.timm_api.TimmClassifierAPI` (``forward_intermediates`` returns
    the self-attention blocks' patch tokens, as timm's ``Cait``), ``save_pretrained`` / ``from_pretrained`` from
    :class:`~layerscale.models.hub_mixin.HubMixin`. Bad arguments are a one-line ``ValueError`` at construction: the
    flags (``qkv_bias``, ``dynamic_img_size``, ``grad_checkpointing``) must be True or False, the shared numbers are
    checked by :func:`~layerscale.models.trunk_args.resolve_trunk_args`.
    """

    _cfg_defaults = dict(interpolation="bicubic", crop_pct=1.0, mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD,
                         pool_size=None, first_conv="patch_embed.proj", classifier="head")

    def __init__(self, img_size: int = 224, patch_size: int = 16, in_chans: int = 3, num_classes: int = 1000,
                 embed_dim: int = 192, depth: int = 24, num_heads: int = 4, mlp_ratio: float = 4.0,
                 qkv_bias: bool = True, depth_token_only: int = 2, residual: str = "layerscale",
                 init_value: float | None = None, ls_placement: str = "both", attn_type: str = "talking_heads",
                 drop_rate: float = 0.0, attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0,
                 drop_path_schedule: str = "uniform", norm_eps: float = 1e-6,
                 grad_checkpointing: bool = False, init_values: float | None = None,
                 norm: str = "layernorm", global_pool: str = "token", dynamic_img_size: bool = False) -> None:
        super().__init__()
        self.grad_checkpointing = check_grad_checkpointing(grad_checkpointing)
        check_positive_int("depth_token_only", depth_token_only, MAX_DEPTH)
        check_positive_int("in_chans", in_chans)
        check_patch(img_size, patch_size)
        qkv_bias, dynamic_img_size = check_bool("qkv_bias", qkv_bias), check_bool("dynamic_img_size", dynamic_img_size)
        init_value, method, norm_layer = resolve_trunk_args(
            depth=depth, embed_dim=embed_dim, num_heads=num_heads, drop_rate=drop_rate, residual=residual,
            norm=norm, norm_eps=norm_eps, init_value=init_value, init_values=init_values,
            attn_drop_rate=attn_drop_rate, mlp_ratio=mlp_ratio)
        epsilon = init_value if init_value is not None else init_value_for_depth(depth)
        total = depth + depth_token_only
        self.num_classes, self.embed_dim, self.depth, self.residual = num_classes, embed_dim, depth, method.name
        self.init_value = epsilon
        self.global_pool, self.dynamic_img_size = check_global_pool(global_pool), dynamic_img_size
        self.residual_method = method  # its stream hooks (multi-stream methods) and prepare_model (Admin)
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim, strict_img_size=not dynamic_img_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches, embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        rates = drop_path_rates(depth, drop_path_rate, drop_path_schedule)
        common = dict(residual=method, depth=total, init_value=epsilon, ls_placement=ls_placement,
                      norm_layer=norm_layer, drop=drop_rate, attn_drop=attn_drop_rate)
        self.blocks = nn.Sequential(*[
            Block(embed_dim, num_heads, mlp_ratio, qkv_bias, index=i + 1, attn_type=attn_type, drop_path=rates[i],
                  **common)
            for i in range(depth)
        ])
        self.blocks_token_only = nn.ModuleList([
            ClassAttentionBlock(embed_dim, num_heads, mlp_ratio, qkv_bias, index=depth + j + 1, **common)
            for j in range(depth_token_only)
        ])
        self.norm = method.final_norm(norm_layer, embed_dim)
        self.stream_reduce = method.stream_reduction(embed_dim)  # None but for AttnRes's output aggregation
        self.head_drop = nn.Dropout(drop_rate)
        self.head = classifier_head(embed_dim, num_classes)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise every parameter (usable after ``to_empty()`` from the meta device)."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        init_transformer_weights(self)
        self.residual_method.prepare_model(self)

    def _embed_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W) -> (B, N, D)``: patches with the position embedding, before the blocks."""
        pos_embed = self._position_embedding(self.patch_embed.feature_grid(x))
        return self.pos_drop(self.patch_embed(x) + pos_embed)

    def _finish_features(self, x: torch.Tensor) -> torch.Tensor:
        """The self-attention blocks' output ``(B, N, D)`` → class attention → normalised ``[cls; patches]``
        (without a class token, pruned by ``prune_intermediate_layers``: the normalised patches)."""
        if self.cls_token is None:
            return x if self.norm is None else self.norm(x)
        cls = self.residual_method.expand_stream(self.cls_token.expand(x.shape[0], -1, -1))
        for block in self.blocks_token_only:
            cls = self._run_block(block, x, cls)
        x = torch.cat((self._reduce_stream(cls), x), dim=1)
        return x if self.norm is None else self.norm(x)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W) -> (B, 1 + N, D)``: normalised ``[cls; patches]``."""
        stream = self._run_blocks(self.blocks, self.residual_method.expand_stream(self._embed_tokens(x)))
        return self._finish_features(self._reduce_stream(stream))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits ``(B, num_classes)``."""
        return self.forward_head(self.forward_features(x))
