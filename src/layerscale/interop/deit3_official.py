"""Keys of the official DeiT III code (facebookresearch/deit ``models_v2.py``, ``Layer_scale_init_Block``).

Same layout as timm's DeiT III ViT (position embedding on the patches only: build our ViT with
``no_embed_class=True``, the default) except that LayerScale is kept as bare ``gamma_1`` / ``gamma_2`` block
parameters — timm's own loader renames them with ``re.sub(r"gamma_([0-9])", r"ls\\1.gamma", key)``. Official files
are ``{"model": ...}``.
"""

from __future__ import annotations

from .rules import KeyFormat, Rule, unchanged

B = "blocks.{i}."

DEIT3_OFFICIAL = KeyFormat(
    name="deit3_official",
    description="official DeiT III code (blocks.{i}.gamma_1, no class-attention blocks)",
    rules=(
        *unchanged("cls_token", "pos_embed", "patch_embed.proj.{p}", "norm.{p}", "head.{p}"),
        *unchanged(*(B + name for name in ("norm1.{p}", "attn.qkv.{p}", "attn.proj.{p}", "norm2.{p}",
                                           "mlp.fc1.{p}", "mlp.fc2.{p}"))),
        Rule(B + "gamma_1", B + "ls1.gamma"),
        Rule(B + "gamma_2", B + "ls2.gamma"),
    ),
)
