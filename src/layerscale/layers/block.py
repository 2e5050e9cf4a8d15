"""Transformer blocks whose residual updates are chosen by a residual method (``residual=``).

For each branch the update is ``x ← post_norm(α·x + drop_path(scale(output_norm(F(norm(u))))))`` with the slots
filled by :class:`layerscale.residual.ResidualMethod` (``α·x`` is ``skip{i}(x)`` when the method has a skip module,
Admin's ω). With the default ``residual="layerscale"`` the keys are timm's: ``norm1``, ``attn``, ``ls1.gamma``,
``norm2``, ``mlp``, ``ls2.gamma``.

A multi-stream method (Hyper-Connections, mHC) fills ``stream_mix{i}``: the block's stream is then ``(..., n, dim)``
and each branch reads its input from the streams and writes its update back to them::

    u, carried, w = stream_mix.read(H)                         # u = A_mᵀ H, carried = A_rᵀ H
    H ← stream_mix.write(carried, w, drop_path(scale(output_norm(F(norm(u))))))      # carried + w ⊗ update
"""

from __future__ import annotations

import torch
from torch import nn

from ..residual.base import BlockContext, ResidualMethod
from ..residual.registry import resolve_residual
from .attention import Attention, ClassAttention, TalkingHeadAttention
from .drop_path import DropPath
from .mlp import Mlp
from .norms import NormFactory, norm_factory

__all__ = ["Block", "ClassAttentionBlock", "ATTENTION_TYPES"]

ATTENTION_TYPES = {"self": Attention, "talking_heads": TalkingHeadAttention}


def _proj_bias(method: ResidualMethod, ctx: BlockContext) -> bool | None:
    """Whether attention's output projection has a bias: ``None`` lets attention decide (no bias with a head scale)."""
    return True if method.head_scale_keeps_proj_bias and method.head_scale_init(ctx) is not None else None



def mlp_hidden(dim: int, mlp_ratio: float) -> int:
    """The MLP's hidden width ``int(dim * mlp_ratio)``; a one-line ``ValueError`` unless ``mlp_ratio`` is a finite
    number > 0 giving at least one hidden unit."""
    ok = isinstance(mlp_ratio, (int, float)) and not isinstance(mlp_ratio, bool) and 0 < mlp_ratio < float("inf")
    if not ok or int(dim * mlp_ratio) < 1:
        raise ValueError(f"mlp_ratio must be a number > 0 with int(embed_dim * mlp_ratio) >= 1, got {mlp_ratio!r} "
                         f"(embed_dim {dim})")
    return int(dim * mlp_ratio)

class _ResidualBranches(nn.Module):
    """Builds and applies the per-branch residual slots (``norm{i}``, ``out_norm{i}``, ``ls{i}``, ``post_norm{i}``,
    ``skip{i}``, ``stream_mix{i}``)."""

    def _build_slots(self, method: ResidualMethod, ctx: BlockContext, drop_path: float) -> None:
        method.validate(ctx)
        self.residual = method.name
        self.context = ctx
        self.skip_weight = float(method.skip_weight(ctx))
        for i, branch in ((1, "attn"), (2, "mlp")):
            setattr(self, f"norm{i}", method.norm(ctx, branch))
            setattr(self, f"out_norm{i}", method.output_norm(ctx, branch))
            setattr(self, f"ls{i}", method.scale(ctx, branch))
            setattr(self, f"post_norm{i}", method.post_norm(ctx, branch))
            setattr(self, f"drop_path{i}", DropPath(drop_path))
            setattr(self, f"skip{i}", method.skip_scale(ctx, branch))
            setattr(self, f"stream_mix{i}", method.stream_mix(ctx, branch))
        mixes = (self.stream_mix1, self.stream_mix2)
        if any(m is not None for m in mixes) and (
                None in mixes or self.skip_weight != 1.0 or any(
                    getattr(self, f"{slot}{i}") is not None for slot in ("post_norm", "skip") for i in (1, 2))):
            raise ValueError(f"residual {method.name!r}: a multi-stream connection needs a stream_mix in both branches "
                             f"and no post_norm, skip_scale or skip_weight (the connection owns the skip path)")

    def _update_streams(self, i: int, stream: torch.Tensor, fn, context: torch.Tensor | None = None) -> torch.Tensor:
        """One branch on a multi-stream residual: read ``u`` from the streams, ``F``, write the update back.

        ``context`` (class attention) is appended to the branch input as keys/values: ``F(norm([u; context]))``.
        """
        mix = getattr(self, f"stream_mix{i}")
        u, carried, weights = mix.read(stream)
        y = fn(self._branch_input(i, u if context is None else torch.cat((u, context), dim=1)))
        out_norm, scale = getattr(self, f"out_norm{i}"), getattr(self, f"ls{i}")
        if out_norm is not None:
            y = out_norm(y)
        if scale is not None:
            y = scale(y)
        mask = getattr(self, f"drop_path{i}").keep_mask(y)
        return mix.write(carried, weights, y if mask is None else y * mask)

    def _branch_input(self, i: int, u: torch.Tensor) -> torch.Tensor:
        norm = getattr(self, f"norm{i}")
        return u if norm is None else norm(u)

    def _update(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``post_norm(α·x + drop_path(scale(output_norm(y))))``, fused into one ``addcmul`` where possible."""
        out_norm, scale, post = getattr(self, f"out_norm{i}"), getattr(self, f"ls{i}"), getattr(self, f"post_norm{i}")
        if out_norm is not None:
            y = out_norm(y)
        mask = getattr(self, f"drop_path{i}").keep_mask(y)
        skip = getattr(self, f"skip{i}")
        if skip is not None:
            x = skip(x)
        elif self.skip_weight != 1.0:
            x = x * self.skip_weight
        if scale is not None and hasattr(scale, "add_to"):
            x = scale.add_to(x, y, mask)
        else:
            if scale is not None:
                y = scale(y)
            x = x + (y if mask is None else y * mask)
        return x if post is None else post(x)


class Block(_ResidualBranches):
    """A transformer block: attention branch then MLP branch, each wrapped by the residual method.

    ``index`` (1-based) and ``depth`` place the block in its stack (methods such as DeepNorm, LNS, Mix-LN and the
    LayerScale depth rule need them; without ``depth`` the block counts as a one-block stack, and methods that need
    the real depth raise ``ValueError``). ``attn_type`` is ``"self"`` (SDPA) or ``"talking_heads"`` (CaiT).
    ``norm`` (``"layernorm"`` or ``"rmsnorm"``, eps 1e-6) builds the method's norms when ``norm_layer`` is not given.
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True, *,
                 residual: str | ResidualMethod = "layerscale", index: int = 1, depth: int | None = None,
                 init_value: float | None = None, ls_placement: str = "both", norm_layer: NormFactory | None = None,
                 attn_type: str = "self", causal: bool = False, drop: float = 0.0, attn_drop: float = 0.0,
                 drop_path: float = 0.0, kind: str = "encoder", norm: str = "layernorm") -> None:
        super().__init__()
        method = resolve_residual(residual)
        if attn_type not in ATTENTION_TYPES:
            raise ValueError(f"attn_type must be one of {sorted(ATTENTION_TYPES)}, got {attn_type!r}")
        ctx = BlockContext(dim, num_heads, index, 1 if depth is None else depth, norm_layer or norm_factory(norm),
                           init_value, ls_placement, kind, depth_known=depth is not None)
        extra = {"causal": causal} if attn_type == "self" else {}
        self.attn = ATTENTION_TYPES[attn_type](dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop,
                                               proj_drop=drop, head_scale_init=method.head_scale_init(ctx),
                                               proj_bias=_proj_bias(method, ctx), **extra)
        hidden = mlp_hidden(dim, mlp_ratio)
        self.mlp = Mlp(dim, hidden, drop=drop, mid_norm=method.mid_norm(ctx, hidden))
        self._build_slots(method, ctx, drop_path)
        method.configure(self, ctx)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stream_mix1 is not None:
            x = self._update_streams(1, x, self.attn)
            return self._update_streams(2, x, self.mlp)
        x = self._update(1, x, self.attn(self._branch_input(1, x)))
        return self._update(2, x, self.mlp(self._branch_input(2, x)))


class ClassAttentionBlock(_ResidualBranches):
    """CaiT's class-attention block: only the class token is updated.

    ``x_cls ← x_cls + γ₁ ⊙ CA(LN([x_cls; x]))`` then ``x_cls ← x_cls + γ₂ ⊙ MLP(LN(x_cls))`` (with the LayerScale
    method; other methods change the update the same way as in :class:`Block`).
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True, *,
                 residual: str | ResidualMethod = "layerscale", index: int = 1, depth: int | None = None,
                 init_value: float | None = None, ls_placement: str = "both", norm_layer: NormFactory | None = None,
                 drop: float = 0.0, attn_drop: float = 0.0, drop_path: float = 0.0, norm: str = "layernorm") -> None:
        super().__init__()
        method = resolve_residual(residual)
        ctx = BlockContext(dim, num_heads, index, 1 if depth is None else depth, norm_layer or norm_factory(norm),
                           init_value, ls_placement, depth_known=depth is not None)
        self.attn = ClassAttention(dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=drop,
                                   head_scale_init=method.head_scale_init(ctx), proj_bias=_proj_bias(method, ctx))
        hidden = mlp_hidden(dim, mlp_ratio)
        self.mlp = Mlp(dim, hidden, drop=drop, mid_norm=method.mid_norm(ctx, hidden))
        self._build_slots(method, ctx, drop_path)
        method.configure(self, ctx)

    def forward(self, x: torch.Tensor, x_cls: torch.Tensor) -> torch.Tensor:
        if self.stream_mix1 is not None:  # x_cls is the class token's multi-stream residual, x the patch tokens
            x_cls = self._update_streams(1, x_cls, self.attn, context=x)
            return self._update_streams(2, x_cls, self.mlp)
        u = torch.cat((x_cls, x), dim=1)
        x_cls = self._update(1, x_cls, self.attn(self._branch_input(1, u)))
        return self._update(2, x_cls, self.mlp(self._branch_input(2, x_cls)))
