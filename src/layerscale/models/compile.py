"""Regional compilation: ``torch.compile`` each repeated transformer block instead of the whole model.

A transformer is ``L`` copies of one block. Compiling the whole model (``torch.compile(model)``) traces and lowers
all ``L`` copies, so compile time grows with depth. Compiling each block separately
(``block.compile()``) gives every block the same code object — ``Block.forward`` — and the same guards, so Dynamo
compiles one graph and reuses it for every block: compile time stays nearly flat from 12 to hundreds of blocks, at
the price of no fusion across block boundaries. (PyTorch recipe: "Reducing torch.compile cold start compilation time
with regional compilation".) Blocks whose stochastic-depth rates differ share the graph too: the rate stays a
symbolic input (see :class:`~layerscale.layers.DropPath`).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..layers.block import Block, ClassAttentionBlock

__all__ = ["compile_blocks"]

DEFAULT_BLOCK_TYPES: tuple[type[nn.Module], ...] = (Block, ClassAttentionBlock)


def compile_blocks(model: nn.Module, block_types: tuple[type[nn.Module], ...] = DEFAULT_BLOCK_TYPES,
                   **compile_kwargs: Any) -> nn.Module:
    """Compile, in place, every submodule of ``model`` that is an instance of ``block_types``; return ``model``.

    ``compile_kwargs`` go to :func:`torch.compile` (``backend``, ``mode``, ``dynamic``, ...). The rest of the model
    (embeddings, final norm, head) stays eager. Pass ``block_types`` to compile the blocks of another model, e.g.
    ``(timm.models.vision_transformer.Block,)``. Raises ``ValueError`` when ``model`` has no such block.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"compile_blocks expects an nn.Module, got {type(model).__name__}")
    if not isinstance(block_types, tuple) or not all(isinstance(t, type) for t in block_types):
        raise ValueError(f"block_types must be a tuple of module classes, got {block_types!r}")
    blocks = [m for m in model.modules() if isinstance(m, block_types)]
    if not blocks:
        names = ", ".join(t.__name__ for t in block_types)
        raise ValueError(f"{type(model).__name__} has no submodule of type {names}; pass block_types=(YourBlock,)")
    for block in blocks:
        block.compile(**compile_kwargs)
    return model
