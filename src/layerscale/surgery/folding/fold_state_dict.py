"""Fold LayerScale in a state dict (our keys), without building the model.

``<block>.ls1.gamma`` folds into ``<block>.attn.proj``, ``<block>.ls2.gamma`` into ``<block>.mlp.fc2`` (rows of
the weight and the bias: ``W ← diag(γ) W``, ``b ← γ ⊙ b``), ``<block>.attn.head_scale.gamma`` into the input
columns of ``<block>.attn.proj`` belonging to each head. The folded keys are those of the same architecture
built without scales: our models with ``residual="prenorm"``, timm ViTs and DeiT III built with ``init_values=0`` (per-head scales
leave ``attn.proj`` without a bias, as it was built).
"""

from __future__ import annotations

import re
from typing import Mapping

import torch

from ...interop.rules import format_keys
from ...messages import shown_name, shown_value

__all__ = ["fold_state_dict", "folded_target"]

_LS = re.compile(r"(?P<block>.+)\.ls(?P<n>[12])\.gamma")
_HEAD = re.compile(r"(?P<block>.+)\.attn\.head_scale\.gamma")


#: Weight dtypes a scale folds into exactly as ``W ← diag(γ) W`` (torch multiplies them; an integer weight would
#: cast γ to an integer, 0.1 → 0, and float8 has no arithmetic).
_FOLDABLE = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _linear(state_dict: dict, prefix: str, scale_key: str, gamma: torch.Tensor) -> torch.Tensor:
    """The 2-D floating-point weight ``{prefix}.weight`` that ``gamma`` (floating point, not empty) folds into;
    a one-line ``ValueError`` otherwise."""
    key = shown_name(scale_key)
    if not gamma.is_floating_point() or gamma.dtype not in _FOLDABLE:
        raise ValueError(f"cannot fold {key}: its dtype is {gamma.dtype}, expected one of "
                         f"{', '.join(str(d) for d in _FOLDABLE)}")
    if gamma.numel() == 0:
        raise ValueError(f"cannot fold {key}: it holds no values (shape {tuple(gamma.shape)})")
    weight = state_dict.get(f"{prefix}.weight")
    if weight is None or weight.dim() != 2:
        raise ValueError(f"cannot fold {key}: no 2-D weight {shown_name(prefix)}.weight to fold it into")
    if weight.dtype not in _FOLDABLE:
        raise ValueError(f"cannot fold {key} into {shown_name(prefix)}.weight of dtype {weight.dtype}: folding "
                         f"multiplies the weight by the scale, which needs one of "
                         f"{', '.join(str(d) for d in _FOLDABLE)} (convert the checkpoint's weights first)")
    bias = state_dict.get(f"{prefix}.bias")
    if bias is not None and (bias.shape != (weight.shape[0],) or bias.dtype not in _FOLDABLE):
        raise ValueError(f"cannot fold {key}: {shown_name(prefix)}.bias has shape {tuple(bias.shape)} and dtype "
                         f"{bias.dtype}, expected ({weight.shape[0]},) (one value per row of the weight) and a "
                         "floating-point dtype")
    return weight


def _check_state_dict(state_dict: object) -> None:
    """A one-line ``ValueError`` unless ``state_dict`` is a mapping of ``str`` names to tensors."""
    expected = "fold_state_dict expects a state dict (a mapping of names to tensors)"
    if not isinstance(state_dict, Mapping):
        raise ValueError(f"{expected}, got {type(state_dict).__name__}")
    for key, value in state_dict.items():
        if not isinstance(key, str):
            raise ValueError(f"{expected}: the key {shown_value(key)} ({type(key).__name__}) is not a str")
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{expected}: {shown_name(key)} holds a value of type {type(value).__name__}, "
                             f"not a tensor")


def _heads(out: Mapping[str, torch.Tensor], key: str, block: str, gamma: torch.Tensor, columns: int,
           num_heads: int | None) -> int:
    """The number of heads of the per-head scale ``gamma`` (``key``): its length when it is 1-D, divides the
    ``columns`` of ``attn.proj`` and agrees with ``num_heads`` and with talking-heads attention's ``proj_l``
    ``(H, H)`` when either is known; a one-line ``ValueError`` naming the key and both shapes otherwise."""
    heads = gamma.shape[0] if gamma.dim() == 1 else None
    mix = out.get(f"{block}.attn.proj_l.weight")
    known = num_heads if num_heads is not None else (
        mix.shape[0] if isinstance(mix, torch.Tensor) and mix.dim() == 2 else None)
    if heads is None or columns % heads or (known is not None and heads != known):
        proj = f"{shown_name(block)}.attn.proj.weight"
        expected = (f"({known},), one value per head of the {columns} input columns of {proj}" if known is not None
                    else f"(num_heads,), one value per head, num_heads dividing the {columns} input columns of {proj}")
        raise ValueError(f"cannot fold {shown_name(key)} of shape {tuple(gamma.shape)}: expected {expected}")
    return heads


def folded_target(folded: Mapping[str, torch.Tensor]) -> str:
    """Which model a folded state dict loads into, told from its block keys: blocks with ``norm1`` / ``norm2``
    (LayerScale, scalar scales) → ``residual="prenorm"`` (and a timm ViT or DeiT III built with ``init_values=0``); blocks without
    norms (ReZero, SkipInit) → ``residual="tfixup"``, the plain un-normalised residual ``x + F(x)``."""
    blocks = {k.split(".attn.proj.weight")[0] for k in folded if k.endswith(".attn.proj.weight")}
    has_norms = bool(blocks) and all(f"{b}.norm1.weight" in folded or f"{b}.norm1.bias" in folded for b in blocks)
    other_norms = any(re.search(r"\.(post_norm|out_norm)[12]\.", k) for k in folded)
    no_proj_bias = any(f"{b}.attn.proj.bias" not in folded for b in blocks)
    bias_note = " (with attn.proj built without a bias)" if no_proj_bias else ""
    if has_norms and not other_norms:
        return f'the same model built with residual="prenorm"{bias_note} (a timm ViT or DeiT III: init_values=0)'
    if not blocks or other_norms or any(f"{b}.norm1.weight" in folded for b in blocks):
        return "the same architecture built without scales"
    return f'the same model built with residual="tfixup" (x + F(x), no norms in its blocks){bias_note}'


def fold_state_dict(state_dict: Mapping[str, torch.Tensor], *,
                    num_heads: int | None = None) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """``(folded, counts)``: a new state dict with every LayerScale multiplied into its branch's output linear.

    ``counts`` maps each rule (``"ls1.gamma -> attn.proj"`` ...) to the number of scales folded. Raises
    ``ValueError`` naming the key when a scale cannot be folded exactly (an ``out_norm{n}`` between the linear and
    the scale, a missing linear, a shape that does not fit) or when other scale-like keys remain
    (``gamma_1`` / ``lambda1``: convert to our keys first), when a scale, weight or bias is not floating point
    (``float16``, ``bfloat16``, ``float32``, ``float64``: an integer weight would round γ to an integer, float8 has
    no arithmetic), and when there is nothing to fold. Inputs are not modified.

    Shapes: ``ls{n}.gamma`` is ``(D,)``, one value per row of the linear it folds into, or ``(1,)`` (a scalar
    scale); ``attn.head_scale.gamma`` is ``(num_heads,)``, a count that divides the projection's input columns and
    equals ``num_heads`` when given (the state dict alone does not say how many heads an ``Attention`` has;
    talking-heads attention's ``proj_l`` does). Another shape, or ``state_dict`` not a mapping of ``str`` names to
    tensors, is a one-line ``ValueError``: a scale is never flattened to fit.
    """
    _check_state_dict(state_dict)
    if num_heads is not None and (isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1):
        raise ValueError(f"num_heads must be a positive int or None, got {num_heads!r}")
    out = dict(state_dict)
    counts: dict[str, int] = {}
    foreign = [k for k in out if re.search(r"(^|\.)(gamma_[12]|lambda1)$", k)]
    if foreign:
        raise ValueError(f"fold_state_dict works on our keys; convert these first: {format_keys(foreign)}")
    for key in [k for k in out if _HEAD.fullmatch(k)]:
        block = _HEAD.fullmatch(key)["block"]
        gamma = out.pop(key)
        weight = _linear(out, f"{block}.attn.proj", key, gamma)
        heads = _heads(out, key, block, gamma, weight.shape[1], num_heads)
        out[f"{block}.attn.proj.weight"] = (weight.view(weight.shape[0], heads, -1)
                                            * gamma.to(weight.dtype).view(1, heads, 1)).reshape(weight.shape)
        label = "attn.head_scale.gamma -> attn.proj (columns per head)"
        counts[label] = counts.get(label, 0) + 1
    for key in [k for k in out if _LS.fullmatch(k)]:
        m = _LS.fullmatch(key)
        block, n = m["block"], m["n"]
        norm_keys = [k for k in out if k.startswith(f"{block}.out_norm{n}.")]
        if norm_keys:
            raise ValueError(f"cannot fold {shown_name(key)}: {shown_name(block)}.out_norm{n} sits between the "
                             "branch's linear layer and the scale, so folding would be inexact")
        target = f"{block}.attn.proj" if n == "1" else f"{block}.mlp.fc2"
        gamma = out.pop(key)
        weight = _linear(out, target, key, gamma)
        if tuple(gamma.shape) not in ((1,), (weight.shape[0],)):
            raise ValueError(f"cannot fold {shown_name(key)} of shape {tuple(gamma.shape)}: expected "
                             f"({weight.shape[0]},), one value per row of {shown_name(target)}.weight, or (1,)")
        g = gamma.to(weight.dtype)
        out[f"{target}.weight"] = weight * g.unsqueeze(1)
        if f"{target}.bias" in out:
            out[f"{target}.bias"] = out[f"{target}.bias"] * g
        label = "ls1.gamma -> attn.proj" if n == "1" else "ls2.gamma -> mlp.fc2"
        counts[label] = counts.get(label, 0) + 1
    leftover = [k for k in out if k.endswith((".gamma", ".layer_scale"))]
    if leftover:
        raise ValueError(f"cannot fold {format_keys(leftover)}: not a LayerScale on a known branch")
    if not counts:
        raise ValueError("the state dict has no LayerScale to fold (no ls1.gamma, ls2.gamma or "
                         "attn.head_scale.gamma keys)")
    return out, counts
