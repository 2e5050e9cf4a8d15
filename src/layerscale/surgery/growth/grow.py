"""Grow a model deeper with blocks that start as the exact identity: LayerScale at ``γ = G`` on both branches.

A new block computes ``x ← x + γ₁ ⊙ F₁(LN(x))`` then ``x ← x + γ₂ ⊙ F₂(LN(x))`` (Touvron et al. 2021, CaiT,
eq. 1). At ``γ = 0`` both updates are exactly zero, so the grown model computes exactly the source's function (for
finite activations); a ``G > 0`` moves it by the new branches' outputs times ``G``. This is LLaMA Pro's block
expansion (Wu et al. 2024, §3.1: copies of blocks whose output projections are zero, inserted after every group
of blocks) with the zero placed on a separate scale instead of the copied weights, so ``init="copy"`` keeps the
neighbour's weights and training moves γ away from zero like any LayerScale; SOLAR's depth up-scaling (Kim et al.
2023) stacks copied layers the same way, without the identity start.

Placement (``where``; blocks numbered 0 … L−1 as in the state-dict keys; one new block after each place):

* ``"top"``: ``K`` blocks after the last block;
* ``"every:M"``: one block after blocks ``M−1, 2M−1, …`` (the first ``K`` of them; needs ``K ≤ ⌊L/M⌋``);
  the default is ``every:⌊L/K⌋``, the new blocks spread evenly as in LLaMA Pro;
* ``"after:i,j,…"``: one block after each listed block (``K`` indices; repeat one to insert several there).

``init="copy"`` copies the block the new one follows; ``init="random"`` draws fresh weights with the family's
initialisation. Every source block gains LayerScale where it had none, at ``γ = 1`` (its own function exactly), so
that the grown model is one uniform LayerScale architecture (see :mod:`layerscale.surgery.block_list`). A post-norm
decoder (Gemma 2 / 3, OLMo 2 / 3, EXAONE 4: ``x ← x + g ⊙ n(F(·))``) gains nothing: its post-norms' per-channel gain
``g`` is the branch scale, set to ``G`` in a new block
(:func:`~layerscale.surgery.hf.hf_decoder_layers.post_norm_gains`), and the grown model keeps the source's
architecture.
"""

from __future__ import annotations

import copy
from collections import Counter

import torch
from torch import nn

from ...layers.layer_scale import check_init_value
from ...models.validation import MAX_DEPTH, check_bool
from ..block_list import block_family
from .new_blocks import record_new_blocks

__all__ = ["grow", "insertion_points", "GROW_INITS"]

GROW_INITS = ("copy", "random")


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def insertion_points(where: str | None, insert: int, depth: int) -> list[int]:
    """The 0-based blocks after which one new block goes each (sorted, repeats allowed), for ``insert`` new blocks
    in a stack of ``depth``; ``ValueError`` (one line naming the value) for a bad ``where``."""
    insert = _positive_int("insert", insert)
    if depth + insert > MAX_DEPTH:  # each new block is a deep copy: bounded before the first is made
        raise ValueError(f"insert={insert}: {depth} + {insert} blocks is more than {MAX_DEPTH}, the most blocks a "
                         f"model may have")
    if where is None:
        if insert > depth:
            raise ValueError(f"insert={insert} new blocks cannot be spread over {depth} blocks (at most one after "
                             f"each); give where='top' or where='after:...'")
        where = f"every:{depth // insert}"
    if not isinstance(where, str):
        raise ValueError(f"where must be 'top', 'every:M' or 'after:i,j,...', got {where!r}")
    kind, _, arg = where.partition(":")
    if where == "top":  # not "top:", which names no place
        return [depth - 1] * insert
    if kind == "every":
        try:
            step = int(arg)
        except ValueError:
            raise ValueError(f"where={where!r}: M in every:M must be an integer >= 1") from None
        if step < 1:
            raise ValueError(f"where={where!r}: M in every:M must be an integer >= 1")
        if insert > depth // step:
            raise ValueError(f"where={where!r}: {depth} blocks have {depth // step} places every {step} blocks, "
                             f"fewer than insert={insert}")
        return [step * (k + 1) - 1 for k in range(insert)]
    if kind == "after":
        try:
            points = [int(p) for p in arg.split(",")]
        except ValueError:
            raise ValueError(f"where={where!r}: after: takes comma-separated block indices, e.g. after:3,7") from None
        bad = [p for p in points if not 0 <= p < depth]
        if bad:
            where_is = "negative" if bad[0] < 0 else "past the depth"
            raise ValueError(f"where={where!r}: block index {bad[0]} is {where_is} (blocks 0..{depth - 1})")
        if len(points) != insert:
            raise ValueError(f"where={where!r} names {len(points)} places for insert={insert} new blocks; give one "
                             f"index per new block (repeat an index to insert several there)")
        return sorted(points)
    raise ValueError(f"where must be 'top', 'every:M' or 'after:i,j,...', got {where!r}")


def grow(model: nn.Module, insert: int, where: str | None = None, init: str = "copy", gamma: float = 0.0, *,
         inplace: bool = False, seed: int | None = None) -> nn.Module:
    """Insert ``insert`` new blocks into ``model`` (see the module docstring for ``where`` / ``init``), each with
    LayerScale ``γ = gamma`` on both branches; returns the grown model (a deep copy unless ``inplace``).

    Supported: our ViT / CaiT / GPT (residual ``layerscale`` or ``prenorm``), timm ViT / DeiT III / CaiT, Hugging
    Face causal LMs (:data:`~layerscale.surgery.block_list.FAMILY_NAMES`) and ViT / DeiT / DINOv2. The grown model
    records its new blocks (``model.layerscale_new_blocks``, 0-based indices in the grown stack) for
    :func:`~layerscale.surgery.freeze_all_but_new_blocks`. ``seed`` fixes the draw of ``init="random"``. Raises
    one-line ``ValueError`` for a bad argument or a model it cannot grow, before changing anything.
    """
    family = block_family(model)
    family.check_editable(model)
    if init not in GROW_INITS:
        raise ValueError(f"init must be one of {', '.join(GROW_INITS)}, got {init!r}")
    gamma = check_init_value(gamma, "gamma")
    inplace = check_bool("inplace", inplace)
    depth = len(family.blocks(model))
    points = Counter(insertion_points(where, insert, depth))
    # The grown stack must rebuild from its config; checked on the source's blocks (γ aside, a new block has its
    # source's structure) before a copy is made, and before γ is added to the model even when inplace.
    origin = [index for index in range(depth) for _ in range(1 + points[index])]
    source = family.blocks(model)
    family.check_rebuildable(model, [source[index] for index in origin], origin)
    target = model if inplace else copy.deepcopy(model)
    family.add_scales(target)
    generator_state = torch.random.get_rng_state()
    if seed is not None:
        torch.manual_seed(seed)
    try:
        blocks, origin, new = [], [], []
        for index, block in enumerate(family.blocks(target)):
            blocks.append(block)
            origin.append(index)
            for _ in range(points[index]):
                fresh = copy.deepcopy(block)
                if init == "random":
                    family.reinitialise(target, fresh)
                family.set_branch_scales(fresh, gamma)
                for module in fresh.modules():  # its init is γ = G (what reset_parameters() refills)
                    if isinstance(getattr(module, "init_value", None), float):
                        module.init_value = gamma
                new.append(len(blocks))
                blocks.append(fresh)
                origin.append(index)
    finally:
        if seed is not None:
            torch.random.set_rng_state(generator_state)
    family.install(target, blocks, origin)
    record_new_blocks(target, new)
    return target
