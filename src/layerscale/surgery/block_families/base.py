"""The base class of the block-list adapters (:mod:`layerscale.surgery.block_list`), in a file of its own so that
the registry imports the families and each family imports only this base — no import runs back up to the registry.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["BlockFamily", "layer_stack"]


def layer_stack(model: nn.Module, types: tuple[type, ...]) -> tuple[nn.Module, str] | None:
    """``(parent, name)`` of the first non-empty ``nn.ModuleList`` in ``model`` whose entries are all exactly of
    ``types`` (a family's layer classes), found by the layers' classes rather than a path that changes between
    library versions; ``None`` when there is none (or ``types`` is empty)."""
    if not types:
        return None
    for path, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) and all(type(m) in types for m in module):
            parent, _, name = path.rpartition(".")
            return (model.get_submodule(parent) if parent else model), name
    return None


class BlockFamily:
    """The adapter of one model family (see :mod:`layerscale.surgery.block_list`). Subclasses implement every
    method."""

    #: short name shown in messages and recorded in written configs
    name = "?"

    def matches(self, model: nn.Module) -> bool:
        """Whether ``model`` belongs to this family."""
        raise NotImplementedError

    def check_editable(self, model: nn.Module) -> None:
        """``ValueError`` (one line) when this model's depth cannot be changed exactly (e.g. a residual method
        whose blocks depend on the depth, which a model rebuilt at another depth would not reproduce)."""

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        """The main stack, in forward order."""
        raise NotImplementedError

    def install(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        """Make ``blocks`` the model's stack; ``origin[i]`` is the old index of new block ``i`` (for a copy, the
        block it was copied from), used for per-layer configuration such as ``layer_types``."""
        raise NotImplementedError

    def check_rebuildable(self, model: nn.Module, blocks: list[nn.Module], origin: list[int | None]) -> None:
        """``ValueError`` (one line) when ``model`` with ``blocks`` installed (see :meth:`install`) would be saved
        as something its own loader rebuilds differently. Called on the source model before it is copied or changed
        (``prune`` and ``grow``, ``inplace`` or not): ``blocks`` are the source's blocks in their new order, a new
        block given as the block it is copied from (its structure; γ, which :meth:`add_scales` adds later, is not
        compared). Default: nothing to check (the family's loader builds what :meth:`install` records)."""

    def add_scales(self, model: nn.Module) -> None:
        """LayerScale on both branches of every block; ``γ = 1`` on the branches that had none."""
        raise NotImplementedError

    def branch_scales(self, block: nn.Module) -> list[nn.Parameter]:
        """The γ of both branches of ``block`` (empty when it has none)."""
        raise NotImplementedError

    def set_branch_scales(self, block: nn.Module, value: float) -> None:
        """Scale both branches of ``block`` by ``value`` (what :func:`~layerscale.surgery.grow` gives a new block;
        ``0``: the block is the identity). Default: each γ of :meth:`branch_scales` filled with ``value``."""
        with torch.no_grad():
            for scale in self.branch_scales(block):
                scale.fill_(value)

    def reinitialise(self, model: nn.Module, block: nn.Module) -> None:
        """Fresh weights for ``block`` with the family's initialisation."""
        raise NotImplementedError

    def keep_folded_loadable(self, model: nn.Module) -> None:
        """After :func:`~layerscale.surgery.fold_layerscale`, whatever the family's own loader needs to rebuild the
        folded model exactly from its save (default: nothing; a family whose architecture always has scales puts
        ``γ = 1`` back, so the save holds every key and plain ``from_pretrained`` initialises none)."""

    def depth_key(self) -> str:
        """How the family's constructor / config calls the depth (for messages and docs)."""
        return "depth"
