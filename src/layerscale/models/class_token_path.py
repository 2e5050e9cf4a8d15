"""The class-token path: the last block of a class-token ViT computed for the class token only, exactly.

A ViT whose head reads only the class token (``global_pool="token"``) discards every other token of the last block's
output. In that block the other tokens are still needed as keys and values of the class token's attention, but
their queries, attention outputs, output projection, residual updates and MLP are not: with ``N`` tokens the block
computes ``K, V = norm₁(x) W_{k,v}`` for all tokens and, for the class token ``c`` alone::

    c ← post₁(α·c + drop_path(scale₁(out_norm₁(proj(softmax(q_c Kᵀ / √d_h) V)))))     q_c = norm₁(c) W_q
    c ← post₂(α·c + drop_path(scale₂(out_norm₂(MLP(norm₂(c))))))

— the block update of Dosovitskiy et al. 2021 (ViT, Eq. 2–4) restricted to row 0, with the slots of the residual
method (see :mod:`layerscale.residual.base`). Every slot, the MLP and the final norm act on each token separately, so
row 0 of the full block equals this computation up to floating-point summation order (the same operations on fewer
rows); the discarded rows receive exactly zero gradient in the full path, so the gradients agree too. Work saved:
about 10/12 of the last block's matrix products (of the ``12 N D²`` flops of a block with MLP ratio 4, the K/V
projection ``4 N D²`` stays), i.e. 1/L·(5/6) of the model. CaiT already builds its class-attention stage this way
(Touvron et al. 2021, "Going deeper with Image Transformers", Sec. 3).

Stochastic depth stays exact: :class:`~layerscale.layers.DropPath` draws one uniform per sample, of shape
``(B, 1, 1)`` whatever the token count, in the same order (attention branch, then MLP branch), so the class-token path
consumes the random stream exactly as the full path does. Dropout does not (the full path draws a mask for every
token), so the path is taken only when it is provably exact — see :func:`class_token_path_applies`; otherwise the
model runs its full path. ``forward_features`` and any caller that needs all tokens always take the full path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers.attention import Attention
from ..layers.block import Block, _ResidualBranches
from ..layers.drop_path import DropPath
from ..layers.dyt import DyT
from ..layers.layer_scale import HeadScale, LayerScale, ScalarScale
from ..layers.mlp import Mlp
from ..residual.base import ResidualMethod
from ..residual.normalization.lns import DepthScaledLayerNorm

__all__ = ["FULL_PATH_METHODS", "SINGLE_STREAM_METHODS", "class_token_block", "class_token_path_applies",
           "class_token_logits"]

#: Residual methods whose blocks keep one stream of tokens and whose slots act per token (checked again per module
#: below). A method not listed here — a user-defined one, or a multi-stream method — makes the model take its full
#: path.
SINGLE_STREAM_METHODS = frozenset({
    "prenorm", "layerscale", "layerscale_head", "scalar", "postnorm", "rezero", "skipinit", "tfixup", "deepnorm",
    "lns", "periln", "mixln", "dyt", "normformer", "admin",
})
#: Registered methods that always take the full path: Hyper-Connections and mHC widen the residual into ``n``
#: streams, AttnRes into a tuple of earlier outputs, that the model reduces only after the last block, so the
#: "class-token row" is not one row of one stream; BHyT's MLP-branch norm reads the statistic its block's first
#: norm recorded, a coupling the path's per-slot checks do not cover.
FULL_PATH_METHODS = frozenset({"hc", "hc_static", "mhc", "attnres", "attnres_block", "bhyt"})

#: Slot modules known to act on each token separately (exact types: a subclass may override ``forward``).
_PER_TOKEN_SLOTS = (nn.LayerNorm, nn.RMSNorm, DepthScaledLayerNorm, DyT, LayerScale, ScalarScale)
#: The same, named by module and class: Admin's skip weight ``x ⊙ ω`` (not imported: only its type is compared).
_PER_TOKEN_SLOT_NAMES = frozenset({("layerscale.residual.branch_scaling.admin", "AdminOmega")})
_SLOT_NAMES = tuple(f"{slot}{i}" for i in (1, 2) for slot in ("norm", "out_norm", "ls", "post_norm", "skip"))


def _per_token(module: nn.Module | None) -> bool:
    kind = type(module)
    return module is None or kind in _PER_TOKEN_SLOTS or (kind.__module__, kind.__qualname__) in _PER_TOKEN_SLOT_NAMES


def _has_hooks(module: nn.Module) -> bool:
    """Whether ``module`` or a submodule has a forward / backward hook: such a hook would see (or miss) different
    tensors on the class-token path, e.g. the diagnostics monitor's. Global module hooks (``FlopCounterMode``'s module
    tracker, profilers) observe every module and do not switch the path off, so FLOP counts show the work done."""
    return any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
               for m in module.modules())


def _dropout_active(block: Block) -> bool:
    if not block.training:
        return False
    if block.attn.attn_drop > 0:
        return True
    return any(m.p > 0 for m in block.modules() if isinstance(m, nn.Dropout))


def _exact_block(block: nn.Module) -> bool:
    """Whether ``block`` is a plain single-stream :class:`Block` with per-token slots and no dropout in use."""
    if type(block) is not Block or "forward" in vars(block) or getattr(block, "_compiled_call_impl", None) is not None:
        return False
    if type(block)._update is not _ResidualBranches._update or block.residual not in SINGLE_STREAM_METHODS:
        return False
    attn = block.attn
    if type(attn) is not Attention or attn.causal or type(block.mlp) is not Mlp:
        return False
    if not isinstance(attn.qkv, nn.Linear) or type(attn.qkv).forward is not nn.Linear.forward:
        return False
    if attn.head_scale is not None and type(attn.head_scale) is not HeadScale:
        return False
    if any(getattr(block, f"stream_mix{i}", None) is not None for i in (1, 2)):
        return False
    if not all(_per_token(getattr(block, name, None)) for name in _SLOT_NAMES):
        return False
    if not _per_token(getattr(block.mlp, "mid_norm", None)):
        return False
    if any(type(getattr(block, f"drop_path{i}", None)) is not DropPath for i in (1, 2)):
        return False
    return not _dropout_active(block) and not _has_hooks(block)


def class_token_path_applies(model: nn.Module) -> bool:
    """Whether ``model(x)`` may compute its last block for the class token only, with the same result.

    True when the model reads only the class token (``global_pool`` absent or ``"token"``), has not been told
    otherwise (``model.class_token_path = False`` switches the path off), has a single-stream residual method of
    :data:`SINGLE_STREAM_METHODS` (one whose stream is the tokens themselves), a per-token final norm, no hook on the
    final norm or the head, and its last block passes every structural check: exactly
    :class:`~layerscale.layers.Block` with :class:`~layerscale.layers.attention.Attention` (not causal),
    :class:`~layerscale.layers.mlp.Mlp` and :class:`~layerscale.layers.DropPath`, per-token slots only, no module
    hook anywhere in it, not compiled on its own, and no dropout drawing in training mode. Anything else: ``False``
    (the full path).
    """
    if not getattr(model, "class_token_path", True) or getattr(model, "global_pool", "token") != "token":
        return False
    if getattr(model, "residual", None) not in SINGLE_STREAM_METHODS or getattr(model, "cls_token", None) is None:
        return False
    method = getattr(model, "residual_method", None)
    if method is not None and (type(method).expand_stream is not ResidualMethod.expand_stream
                               or type(method).reduce_stream is not ResidualMethod.reduce_stream):
        return False
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.Sequential) or len(blocks) == 0:
        return False
    norm = getattr(model, "norm", None)
    if not _per_token(norm) or (norm is not None and _has_hooks(norm)) or _has_hooks(model.head):
        return False
    return _exact_block(blocks[-1])


def class_token_block(block: Block, x: torch.Tensor) -> torch.Tensor:
    """Row 0 of ``block(x)``: ``(B, N, D) -> (B, 1, D)``, keys and values from all ``N`` tokens (see module doc).

    ``block`` must satisfy the checks of :func:`class_token_path_applies` (it is not re-checked here).
    """
    attn = block.attn
    h = block._branch_input(1, x)  # per-token norm of every token: keys and values need all of them
    B, N, D = h.shape
    weight, bias = attn.qkv.weight, attn.qkv.bias
    q = F.linear(h[:, :1], weight[:D], None if bias is None else bias[:D])
    kv = F.linear(h, weight[D:], None if bias is None else bias[D:])
    q = q.reshape(B, 1, attn.num_heads, attn.head_dim).transpose(1, 2)
    k, v = kv.reshape(B, N, 2, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
    heads = F.scaled_dot_product_attention(q, k, v)  # attention dropout is off (checked by the caller)
    c = block._update(1, x[:, :1], attn._merge(heads))
    return block._update(2, c, block.mlp(block._branch_input(2, c)))


def class_token_logits(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Logits of ``model`` from its embedded tokens ``(B, 1 + N, D)`` (class token first): every block but the last
    on all tokens, the last on the class token only (:func:`class_token_block`), then the final norm and the head.

    Checkpointing, when on, applies to the last block too. Call only when :func:`class_token_path_applies` holds.
    """
    *_, last = model.blocks
    x = model._run_blocks(model.blocks[:-1], tokens)
    c = model._run_block(lambda t: class_token_block(last, t), x)
    if model.norm is not None:
        c = model.norm(c)
    return model.forward_head(c)
