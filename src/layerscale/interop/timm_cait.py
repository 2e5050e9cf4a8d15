"""timm ``Cait`` keys, which are also the official CaiT code's (facebookresearch/deit ``cait_models.py``).

The only renames are the LayerScale parameters: timm and the official code keep them as bare ``gamma_1`` /
``gamma_2`` parameters of each block, ours are ``ls1.gamma`` / ``ls2.gamma`` (a :class:`~layerscale.LayerScale`
module). Official files wrap the state dict as ``{"model": ...}``, sometimes with ``module.`` on every key (saved
from ``DistributedDataParallel``); :func:`layerscale.interop.normalize_checkpoint` removes both.
"""

from __future__ import annotations

from .rules import KeyFormat, Rule, unchanged

SA = "blocks.{i}."
CA = "blocks_token_only.{i}."

TIMM_CAIT = KeyFormat(
    name="timm_cait",
    description="timm Cait / official CaiT code (blocks.{i}.gamma_1, blocks_token_only.{i}.gamma_1)",
    rules=(
        *unchanged("cls_token", "pos_embed", "patch_embed.proj.{p}", "norm.{p}", "head.{p}"),
        *unchanged(*(SA + name for name in ("norm1.{p}", "attn.qkv.{p}", "attn.proj_l.{p}", "attn.proj_w.{p}",
                                            "attn.proj.{p}", "norm2.{p}", "mlp.fc1.{p}", "mlp.fc2.{p}"))),
        Rule(SA + "gamma_1", SA + "ls1.gamma"),
        Rule(SA + "gamma_2", SA + "ls2.gamma"),
        *unchanged(*(CA + name for name in ("norm1.{p}", "attn.q.{p}", "attn.k.{p}", "attn.v.{p}",
                                            "attn.proj.{p}", "norm2.{p}", "mlp.fc1.{p}", "mlp.fc2.{p}"))),
        Rule(CA + "gamma_1", CA + "ls1.gamma"),
        Rule(CA + "gamma_2", CA + "ls2.gamma"),
    ),
)
