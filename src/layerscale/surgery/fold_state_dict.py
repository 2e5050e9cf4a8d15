"""Fold LayerScale in a state dict (our keys), without building the model.

``<block>.ls1.gamma`` folds into ``<block>.attn.proj``, ``<block>.ls2.gamma`` into ``<block>.mlp.fc2`` (rows of
the weight and the bias: ``W ← diag(γ) W``, ``b ← γ ⊙ b``), ``<block>.attn.head_scale.gamma`` into the input
columns of ``<block>.attn.proj`` belonging to each head. The folded keys are those of the same architecture
built without scales: our models with ``residual="prenorm"``, timm ViTs with ``init_values=None`` (per-head scales
leave ``attn.proj`` without a bias, as it was built).
"""

from __future__ import annotations

import re
from typing import Mapping

import torch

from ..interop.rules import format_keys

__all__ = ["fold_state_dict", "folded_target"]

_LS = re.compile(r"(?P<block>.+)\.ls(?P<n>[12])\.gamma")
_HEAD = re.compile(r"(?P<block>.+)\.attn\.head_scale\.gamma")


def _linear(state_dict: dict, prefix: str, scale_key: str) -> torch.Tensor:
    weight = state_dict.get(f"{prefix}.weight")
    if weight is None or weight.dim() != 2:
        raise ValueError(f"cannot fold {scale_key}: no 2-D weight {prefix}.weight to fold it into")
    return weight


def folded_target(folded: Mapping[str, torch.Tensor]) -> str:
    """Which model a folded state dict loads into, told from its block keys: blocks with ``norm1`` / ``norm2``
    (LayerScale, scalar scales) → ``residual="prenorm"`` (and a timm ViT with ``init_values=None``); blocks without
    norms (ReZero, SkipInit) → ``residual="tfixup"``, the plain un-normalised residual ``x + F(x)``."""
    blocks = {k.split(".attn.proj.weight")[0] for k in folded if k.endswith(".attn.proj.weight")}
    has_norms = bool(blocks) and all(f"{b}.norm1.weight" in folded or f"{b}.norm1.bias" in folded for b in blocks)
    other_norms = any(re.search(r"\.(post_norm|out_norm)[12]\.", k) for k in folded)
    no_proj_bias = any(f"{b}.attn.proj.bias" not in folded for b in blocks)
    bias_note = " (with attn.proj built without a bias)" if no_proj_bias else ""
    if has_norms and not other_norms:
        return f'the same model built with residual="prenorm"{bias_note} (a timm ViT: init_values=None)'
    if not blocks or other_norms or any(f"{b}.norm1.weight" in folded for b in blocks):
        return "the same architecture built without scales"
    return f'the same model built with residual="tfixup" (x + F(x), no norms in its blocks){bias_note}'


def fold_state_dict(state_dict: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """``(folded, counts)``: a new state dict with every LayerScale multiplied into its branch's output linear.

    ``counts`` maps each rule (``"ls1.gamma -> attn.proj"`` ...) to the number of scales folded. Raises
    ``ValueError`` naming the key when a scale cannot be folded exactly (an ``out_norm{n}`` between the linear and
    the scale, a missing linear, a shape that does not fit) or when other scale-like keys remain
    (``gamma_1`` / ``lambda1``: convert to our keys first), and when there is nothing to fold. Inputs are not
    modified.
    """
    out = dict(state_dict)
    counts: dict[str, int] = {}
    foreign = [k for k in out if re.search(r"(^|\.)(gamma_[12]|lambda1)$", k)]
    if foreign:
        raise ValueError(f"fold_state_dict works on our keys; convert these first: {format_keys(foreign)}")
    for key in [k for k in out if _HEAD.fullmatch(k)]:
        block = _HEAD.fullmatch(key)["block"]
        gamma = out.pop(key).reshape(-1)
        weight = _linear(out, f"{block}.attn.proj", key)
        if weight.shape[1] % gamma.numel():
            raise ValueError(f"cannot fold {key}: {gamma.numel()} heads do not divide {weight.shape[1]} columns "
                             f"of {block}.attn.proj.weight")
        heads = gamma.numel()
        out[f"{block}.attn.proj.weight"] = (weight.view(weight.shape[0], heads, -1)
                                            * gamma.to(weight.dtype).view(1, heads, 1)).reshape(weight.shape)
        label = "attn.head_scale.gamma -> attn.proj (columns per head)"
        counts[label] = counts.get(label, 0) + 1
    for key in [k for k in out if _LS.fullmatch(k)]:
        m = _LS.fullmatch(key)
        block, n = m["block"], m["n"]
        norm_keys = [k for k in out if k.startswith(f"{block}.out_norm{n}.")]
        if norm_keys:
            raise ValueError(f"cannot fold {key}: {block}.out_norm{n} sits between the branch's linear layer and "
                             f"the scale, so folding would be inexact")
        target = f"{block}.attn.proj" if n == "1" else f"{block}.mlp.fc2"
        gamma = out.pop(key).reshape(-1)
        weight = _linear(out, target, key)
        if gamma.numel() not in (1, weight.shape[0]):
            raise ValueError(f"cannot fold {key} of {gamma.numel()} values into {target}.weight with "
                             f"{weight.shape[0]} rows")
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
