"""Attention branches: multi-head self-attention, talking-heads attention (CaiT) and class attention (CaiT).

Every variant accepts ``head_scale_init``: when given, a :class:`HeadScale` multiplies each head's output before the
heads are merged (the ``layerscale_head`` method) and the output projection is built **without a bias**, so that the
whole branch output is ``Σ_h γ_h W_h o_h`` and is exactly ε-small at initialisation (a bias added after the merge would
not be scaled). Folding ``γ_h`` into the columns of ``proj`` for head ``h`` is exact. ``proj_bias`` overrides that
choice (NormFormer's head scale starts at 1 and keeps the bias); ``None`` means "no bias when there is a head scale".
``attn_drop`` (dropout on the attention weights) is a real number in ``[0, 1)``, checked when the module is built.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .drop_path import check_drop_probability
from .layer_scale import HeadScale

__all__ = ["Attention", "TalkingHeadAttention", "ClassAttention"]


def _check_heads(dim: int, num_heads: int) -> int:
    if num_heads < 1 or dim % num_heads != 0:
        raise ValueError(f"embed_dim {dim} is not divisible by num_heads {num_heads}; choose heads that divide {dim}")
    return dim // num_heads


def _mix_heads(mix: nn.Linear, scores: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """``mix`` applied across the head dimension of ``(B, H, N, M)`` scores (times ``scale``), without permuting.

    Equals ``mix((scale · scores).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)``: row ``g`` of the result is
    ``Σ_h scale · W[g, h] · scores[:, h] + b[g]``, one ``(H × H) @ (H × N·M)`` product per sample.
    """
    B, H, N, M = scores.shape
    weight = (mix.weight * scale if scale != 1.0 else mix.weight).expand(B, H, H)
    flat = scores.reshape(B, H, N * M)
    mixed = torch.bmm(weight, flat) if mix.bias is None else torch.baddbmm(mix.bias.view(1, H, 1), weight, flat)
    return mixed.view(B, H, N, M)


class _MultiHeadOutput(nn.Module):
    """Shared tail of every attention variant: optional per-head scale, merge heads, project, dropout."""

    def _build_output(self, dim: int, num_heads: int, head_scale_init: float | None, proj_drop: float,
                      proj_bias: bool | None = None) -> None:
        self.head_scale = HeadScale(num_heads, head_scale_init) if head_scale_init is not None else None
        self.proj = nn.Linear(dim, dim, bias=head_scale_init is None if proj_bias is None else proj_bias)
        self.proj_drop = nn.Dropout(proj_drop)

    def _merge(self, heads: torch.Tensor) -> torch.Tensor:
        """``(B, H, N, hd) -> (B, N, H·hd)`` projected by ``proj``."""
        if self.head_scale is not None:
            heads = self.head_scale(heads)
        B, H, N, hd = heads.shape
        return self.proj_drop(self.proj(heads.transpose(1, 2).reshape(B, N, H * hd)))


class Attention(_MultiHeadOutput):
    """Multi-head self-attention on ``F.scaled_dot_product_attention``: ``softmax(q kᵀ / √d_h) v``.

    Keys ``qkv.*`` and ``proj.*`` match timm's ``Attention``. ``causal=True`` masks future positions (GPT).
    """

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = True, attn_drop: float = 0.0,
                 proj_drop: float = 0.0, causal: bool = False, head_scale_init: float | None = None,
                 proj_bias: bool | None = None) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = _check_heads(dim, num_heads)
        self.causal = causal
        self.attn_drop = check_drop_probability("attn_drop", attn_drop)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self._build_output(dim, num_heads, head_scale_init, proj_drop, proj_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        heads = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.0, is_causal=self.causal
        )
        return self._merge(heads)


class TalkingHeadAttention(_MultiHeadOutput):
    """Talking-heads attention (Shazeer et al. 2020), as used in CaiT's self-attention stage.

    ``A = softmax(P_l (q kᵀ / √d_h))`` mixed again by ``P_w`` after the softmax, where ``P_l`` and ``P_w`` are
    learned ``H × H`` linear maps across heads (keys ``proj_l`` and ``proj_w``); output ``A v`` merged by ``proj``.
    Each mix is one batched matmul ``W · A`` on the contiguous ``(B, H, N·N)`` logits, with ``1/√d_h`` folded
    into ``W_l`` (an ``H × H`` product instead of a pass over ``q``), rather than timm's ``Linear`` over permuted
    copies: the same function, about a quarter less time for this module on a CPU (``benchmarks/bench_vs_timm.py``).
    """

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = True, attn_drop: float = 0.0,
                 proj_drop: float = 0.0, head_scale_init: float | None = None, proj_bias: bool | None = None) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = _check_heads(dim, num_heads)
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(check_drop_probability("attn_drop", attn_drop))
        self.proj_l = nn.Linear(num_heads, num_heads)
        self.proj_w = nn.Linear(num_heads, num_heads)
        self._build_output(dim, num_heads, head_scale_init, proj_drop, proj_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        logits = _mix_heads(self.proj_l, q @ k.transpose(-2, -1), self.scale)
        weights = _mix_heads(self.proj_w, logits.softmax(dim=-1))
        return self._merge(self.attn_drop(weights) @ v)


class ClassAttention(_MultiHeadOutput):
    """CaiT class attention: only the class token queries; it attends to ``[cls; patches]``.

    Input ``u = [x_cls; x_patches]`` of shape ``(B, 1 + N, C)``; output ``(B, 1, C)`` =
    ``proj(softmax(q_cls kᵀ / √d_h) v)``. Keys ``q``, ``k``, ``v``, ``proj`` match timm's ``ClassAttn``.
    """

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = True, attn_drop: float = 0.0,
                 proj_drop: float = 0.0, head_scale_init: float | None = None, proj_bias: bool | None = None) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = _check_heads(dim, num_heads)
        self.attn_drop = check_drop_probability("attn_drop", attn_drop)
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.k = nn.Linear(dim, dim, bias=qkv_bias)
        self.v = nn.Linear(dim, dim, bias=qkv_bias)
        self._build_output(dim, num_heads, head_scale_init, proj_drop, proj_bias)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        B, N, C = u.shape
        q = self.q(u[:, :1]).reshape(B, 1, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k(u).reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v(u).reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        heads = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop if self.training else 0.0)
        return self._merge(heads)
