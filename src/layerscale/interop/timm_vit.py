"""timm ``VisionTransformer`` / DeiT III keys (timm >= 0.9; also timm's DINOv2 ports without registers).

Our :class:`~layerscale.models.VisionTransformer` was built with timm's key names, so every rule is an identity;
the table still lists each key family so that a timm checkpoint using a feature our ViT lacks (``fc_norm``,
``reg_token``, ``norm_pre``, ``attn.q_norm``, ...) is reported instead of half-loaded. LayerScale: ``ls1.gamma``,
``ls2.gamma`` (absent when timm's ``init_values`` is ``None``).
"""

from __future__ import annotations

from .rules import KeyFormat, unchanged

VIT_RULES = unchanged(
    "cls_token", "pos_embed", "patch_embed.proj.{p}",
    "blocks.{i}.norm1.{p}", "blocks.{i}.attn.qkv.{p}", "blocks.{i}.attn.proj.{p}", "blocks.{i}.ls1.gamma",
    "blocks.{i}.norm2.{p}", "blocks.{i}.mlp.fc1.{p}", "blocks.{i}.mlp.fc2.{p}", "blocks.{i}.ls2.gamma",
    "norm.{p}", "head.{p}",
)

TIMM_VIT = KeyFormat(
    name="timm_vit",
    description="timm VisionTransformer / DeiT III (blocks.{i}.ls1.gamma); identical to ours",
    rules=VIT_RULES,
)
