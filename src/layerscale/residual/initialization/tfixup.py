"""T-Fixup: ``x ← x + F(x)`` with no LayerNorm, made trainable by initialisation alone (Huang, Perez, Ba and Volkovs
2020, "Improving Transformer Optimization Through Better Initialization", ICML)."""

from __future__ import annotations

from torch import nn

from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod
from .xavier_linear import init_branch_linears

#: T-Fixup's encoder constant: v, w and MLP weights are scaled by ``TFIXUP_ENCODER_CONSTANT · L^(-1/4)``.
TFIXUP_ENCODER_CONSTANT = 0.67


def tfixup_scale(depth: int) -> float:
    """``0.67 · L^(-1/4)`` for a stack of ``L`` blocks (the encoder form of T-Fixup)."""
    return TFIXUP_ENCODER_CONSTANT * depth ** -0.25


class TFixup(ResidualMethod):
    """Every LayerNorm removed; Xavier-uniform weights with value, output-projection and MLP weights × 0.67·L^(-1/4).

    Per block (``L`` = ``ctx.depth`` blocks in the stack, each with an attention and an MLP branch):

    * query and key projections: Xavier uniform, gain 1 (the paper's "Xavier for all parameters"; the official
      fairseq code inherits fairseq's gain 1/√2 for q and k — a fairseq default, not part of the method);
    * value projection (the v third of a packed ``qkv``) and output projection ``proj``: Xavier uniform × 0.67·L^(-1/4);
    * MLP ``fc1`` and ``fc2``: Xavier uniform × 0.67·L^(-1/4); every bias zero.

    This is done by swapping those linears for
    :class:`~layerscale.residual.initialization.xavier_linear.XavierLinear`, which owns its initialisation, so meta-device initialisation and ``model.reset_parameters()`` reproduce it; the keys are
    unchanged. The encoder form is used for decoder-only stacks too: T-Fixup's decoder constant (9L)^(-1/4) is
    derived for decoder blocks with a third, cross-attention sub-layer, which a GPT block does not have.

    **Not applied — the input embeddings.** T-Fixup also initialises the token embeddings ``N(0, d^(-1/2))`` (and the
    official code scales them by (9L)^(-1/4)). That is a model-level parameter a residual method does not own: the
    models keep their own embedding initialisation (ViT/CaiT: a patch-projection convolution and a 0.02 position
    table; GPT: N(0, 0.02) shared with the output layer). The per-block scaling, which is what bounds each update
    in T-Fixup's analysis, is applied in full. Talking-heads mixing maps (CaiT ``proj_l``/``proj_w``) also keep the
    model's initialisation: they mix attention logits across heads and are not on the value path the bound covers.

    No final norm before the head (the method has no normalisation). "No warm-up" is a training-schedule choice
    the trainer must make. ``init_value`` is ignored; ``ls_placement`` must stay ``"both"``; ``depth`` is required.
    """

    name = "tfixup"
    needs_depth = True

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return None

    def configure(self, block: nn.Module, ctx: BlockContext) -> None:
        scale = tfixup_scale(ctx.depth)
        init_branch_linears(block, qk_gain=1.0, value_gain=scale, proj_gain=scale, mlp_gain=scale,
                            distribution="uniform")

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return None
