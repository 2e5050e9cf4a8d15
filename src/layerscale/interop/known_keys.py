"""The weight names of the models whose state dicts use our key layout, told from a name alone.

A state dict read in our layout (``detect_format`` says ``layerscale`` for any ``blocks.*`` layout) may be one of our
models (:class:`~layerscale.VisionTransformer`, :class:`~layerscale.CaiT`, :class:`~layerscale.GPT`, with any
residual method) or a timm ``VisionTransformer`` / DeiT III, whose layout is the same. :func:`unknown_weight_names`
lists the names that neither has, so that a command writing a state dict for one of them (``layerscale fold``) does
not copy a tensor no such model loads — a crafted name such as ``"x\\n\\x1b[2J"``, or a tensor of another model —
into its output unnoticed. The table is checked against every model built with every residual method and against
timm's ViT variants by ``tests/interop/test_known_keys.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["unknown_weight_names"]

_P = r"\.(?:weight|bias)"
_BLOCK = "|".join([
    rf"attn\.(?:qkv|proj|proj_l|proj_w|q|k|v|q_norm|k_norm|norm){_P}",
    r"attn\.head_scale\.gamma",
    r"ls[12]\.gamma",
    rf"mlp\.(?:fc1|fc2|mid_norm|norm){_P}",
    r"norm[12]\.(?:weight|bias|alpha|lam|attn_variance_gain)",
    rf"(?:out_norm|post_norm)[12]{_P}",
    r"skip[12]\.omega",
    r"stream_mix[12]\.(?:alpha|alpha_proj|alpha_scale|beta|beta_proj|beta_scale|bias|gate|key_norm_weight|phi"
    r"|pseudo_query)",
])
_TOP = "|".join([
    r"cls_token|pos_embed|reg_token",
    rf"patch_embed\.proj{_P}",
    rf"(?:norm_pre|fc_norm|head){_P}",
    r"norm\.(?:weight|bias|alpha)",
    r"wte\.weight|wpe\.weight",
    r"stream_reduce\.(?:pseudo_query|key_norm_weight)",
    rf"attn_pool\.(?:latent|(?:kv|q|proj|norm|mlp\.fc1|mlp\.fc2){_P})",
])
_KNOWN = re.compile(rf"(?:blocks|blocks_token_only)\.(?:0|[1-9][0-9]*)\.(?:{_BLOCK})|{_TOP}")


def unknown_weight_names(names: Iterable[str]) -> list[str]:
    """The names (in the order given) that no model of our key layout has: ours (ViT, CaiT, GPT, any residual
    method) or timm's ``VisionTransformer``."""
    return [name for name in names if not (isinstance(name, str) and _KNOWN.fullmatch(name))]
