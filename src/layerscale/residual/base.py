"""The one interface every residual-stabilisation method implements.

A transformer block has two residual branches, attention and MLP. For each branch the block computes::

    y = F(norm(u))                      # u: the branch input (the stream, or [cls; patches] in class attention)
    y = output_norm(y)                  # Peri-LN / Sandwich-LN only
    x = post_norm(skip_weight · x + drop_path(scale(y)))

Each slot (``norm``, ``output_norm``, ``scale``, ``post_norm``) is a module or ``None`` (then skipped, and absent
from the state dict), ``skip_weight`` is a constant. A method says what goes in each slot for a block described by
a :class:`BlockContext`; it may also own special initialisations through the modules it returns. Adding a method
means one file with a :class:`ResidualMethod` subclass and one line in :mod:`layerscale.residual.registry`.

Slots added for the frontier methods, all ``None`` (absent from the state dict) unless a method fills them, so the
keys of every earlier method are unchanged:

* ``skip_scale`` — a module applied to the stream on the skip path instead of the constant ``skip_weight``
  (Admin's learnable ω, key ``skip{i}.omega``);
* ``mid_norm`` — a normalisation inside the MLP, after its activation (NormFormer, key ``mlp.mid_norm.*``);
* ``stream_mix`` — a multi-stream connection (Hyper-Connections, mHC, AttnRes, key ``stream_mix{i}.*``). A method
  with one owns the stream through three hooks: :meth:`ResidualMethod.expand_stream` after the embedding,
  ``stream_mix`` in every branch (``read`` the branch input from the streams, ``write`` the branch output back),
  and :meth:`ResidualMethod.reduce_stream` before the head — or, for a reduction with parameters of its own
  (AttnRes's output aggregation), the module :meth:`ResidualMethod.stream_reduction` builds, which the model keeps
  as ``stream_reduce`` (keys ``stream_reduce.*``). The hooks default to no-ops. The stream is whatever the
  method's hooks agree on: a ``(..., n, dim)`` tensor for Hyper-Connections and mHC, a tuple of ``(..., dim)``
  tensors that grows with depth for AttnRes (each ``write`` returns a new tuple, so a checkpointed block may run
  twice).

A fourth, model-level hook, :meth:`ResidualMethod.prepare_model`, runs at the end of a model's
``reset_parameters()`` (Admin's profiling pass); a fifth, :meth:`ResidualMethod.after_optimizer_step`, after every
optimizer step of a training loop (BHyT's correction recomputed from the current weights; a loop calls it through
:func:`layerscale.residual.after_optimizer_step`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

from ..layers.layer_scale import check_init_value, init_value_for_depth
from ..layers.norms import NormFactory

__all__ = ["Branch", "BlockContext", "ResidualMethod", "PLACEMENTS"]

Branch = Literal["attn", "mlp"]

#: Which branches carry a LayerScale-type scale.
PLACEMENTS: dict[str, tuple[str, ...]] = {"both": ("attn", "mlp"), "attn": ("attn",), "mlp": ("mlp",), "none": ()}


@dataclass(frozen=True)
class BlockContext:
    """What a residual method may know about the block it builds.

    ``index`` is 1-based within a stack of ``depth`` blocks; ``init_value`` is the LayerScale ε (``None`` means
    :func:`init_value_for_depth` of ``depth``); ``placement`` is a key of :data:`PLACEMENTS`; ``kind`` tells
    an encoder from a causal decoder-only stack (for a decoder-only stack DeepNorm's and T-Fixup's constants are
    the encoder's with ``L`` decoder blocks; they would differ only in an encoder-decoder). ``depth_known`` is
    ``False`` when the builder did not say how deep the stack is (a lone :class:`~layerscale.layers.Block`
    without ``depth=``): ``depth`` is then 1 and methods that need the real depth refuse to build.
    """

    dim: int
    num_heads: int
    index: int
    depth: int
    norm_layer: NormFactory
    init_value: float | None = None
    placement: str = "both"
    kind: Literal["encoder", "decoder"] = "encoder"
    depth_known: bool = True

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"ls_placement must be one of {sorted(PLACEMENTS)}, got {self.placement!r}")
        if self.kind not in ("encoder", "decoder"):
            raise ValueError(f"kind must be 'encoder' or 'decoder', got {self.kind!r}")
        if not self.depth_known and self.index != 1:
            raise ValueError(f"block index {self.index} needs depth= (the number of blocks in the stack)")
        if self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")
        if not 1 <= self.index <= self.depth:
            raise ValueError(f"block index must be in [1, {self.depth}], got {self.index}")
        if self.init_value is not None:
            check_init_value(self.init_value)

    @property
    def epsilon(self) -> float:
        """The LayerScale initial value for this block: the explicit one, else the CaiT depth rule."""
        return self.init_value if self.init_value is not None else init_value_for_depth(self.depth)

    def scaled(self, branch: str) -> bool:
        """Whether ``branch`` carries a LayerScale-type scale under this placement."""
        return branch in PLACEMENTS[self.placement]


class ResidualMethod:
    """Base class: plain Pre-LN (``x + F(LN(x))``). Subclasses override the slots they change."""

    name: ClassVar[str] = ""
    #: Whether ``ls_placement`` chooses the branches that carry this method's scale (the LayerScale family).
    #: A method without a per-branch scale accepts only the default ``"both"``: anything else is an error.
    uses_placement: ClassVar[bool] = False
    #: Whether the method needs the block's place in its stack (``index`` of ``depth``), e.g. for its constants.
    needs_depth: ClassVar[bool] = False

    def validate(self, ctx: BlockContext) -> None:
        """Refuse a block this method cannot build faithfully, with a one-line ``ValueError``."""
        if self.needs_depth and not ctx.depth_known:
            raise ValueError(f"residual {self.name!r} needs the block's place in its stack: pass index= and depth= "
                             f"(the number of blocks) to the block")
        if not self.uses_placement and ctx.placement != "both":
            raise ValueError(f"ls_placement={ctx.placement!r} does not apply to residual {self.name!r}, which has no "
                             f"per-branch LayerScale; leave ls_placement at 'both' (the default)")

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        """Normalisation of the branch input."""
        return ctx.norm_layer(ctx.dim)

    def output_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        """Normalisation of the branch output, before the scale."""
        return None

    def scale(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        """A module applied to the branch output; one with ``add_to(x, y, mask)`` fuses the residual update."""
        return None

    def post_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        """Normalisation applied to the updated stream (Post-LN family)."""
        return None

    def skip_weight(self, ctx: BlockContext) -> float:
        """The constant α multiplying the stream on the skip path (DeepNorm)."""
        return 1.0

    def head_scale_init(self, ctx: BlockContext) -> float | None:
        """Initial value of a per-head scale inside the attention branch, or ``None`` for none."""
        return None

    def configure(self, block: nn.Module, ctx: BlockContext) -> None:
        """Adjust a freshly built block (for example swap linears for ones with a special initialisation)."""

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        """The model's last normalisation before the head; Post-LN methods already end normalised."""
        return norm_layer(dim)

    #: Whether the output projection of attention keeps its bias when :meth:`head_scale_init` gives a head scale
    #: (NormFormer keeps it; the per-head LayerScale drops it so that the branch is ε-small at initialisation).
    head_scale_keeps_proj_bias: ClassVar[bool] = False

    def skip_scale(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        """A module applied to the stream on the skip path (replaces ``skip_weight``), e.g. Admin's ω."""
        return None

    def mid_norm(self, ctx: BlockContext, hidden_features: int) -> nn.Module | None:
        """A normalisation of the MLP's hidden activations, after the activation function (NormFormer)."""
        return None

    # --- Multi-stream methods (Hyper-Connections): three hooks, no-ops for a single stream. ---

    #: How many parallel residual streams the method keeps (1: the ordinary stream; AttnRes, whose stream grows
    #: with depth, reports 2: "more than one").
    num_streams: int = 1

    def stream_mix(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        """The connection of ``branch`` to a multi-stream residual, or ``None`` for the ordinary residual.

        The module has ``read(stream) -> (branch_input, carried, write_weights)`` and
        ``write(carried, write_weights, update) -> stream``, ``stream`` of shape ``(..., num_streams, dim)`` (or the
        method's own structure, e.g. AttnRes's tuple of sources).
        """
        return None

    def expand_stream(self, x: torch.Tensor) -> torch.Tensor:
        """The residual stream built from the embedded tokens ``x`` of shape ``(..., dim)`` (identity by default)."""
        return x

    def reduce_stream(self, stream: torch.Tensor) -> torch.Tensor:
        """The tokens ``(..., dim)`` the head (after the final norm) reads from the stream (identity by default)."""
        return stream

    def stream_reduction(self, dim: int) -> nn.Module | None:
        """A module with parameters of its own that turns the stream into the tokens the head reads, in place of
        :meth:`reduce_stream` (AttnRes's output aggregation), or ``None`` (the default: :meth:`reduce_stream`).
        A model builds it once and keeps it as ``stream_reduce``."""
        return None

    def prepare_model(self, model: nn.Module) -> None:
        """Called at the end of a model's ``reset_parameters()`` (after its weights are initialised); no-op."""

    def after_optimizer_step(self, model: nn.Module, step: int, total_steps: int) -> None:
        """Called after optimizer step ``step`` (1-based) of the ``total_steps`` a run plans, with the model whose
        blocks this method built; no-op. A method whose recipe updates state between steps does it here."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
