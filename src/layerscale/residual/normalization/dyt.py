"""DyT residual: Pre-LN with every LayerNorm replaced by Dynamic Tanh, ``DyT(x) = w ⊙ tanh(a·x) + b`` (Zhu, Chen,
He, LeCun and Liu 2025, "Transformers without Normalization", CVPR; arXiv 2503.10622)."""

from __future__ import annotations

from torch import nn

from ...layers.dyt import DyT
from ...layers.layer_scale import check_init_value
from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod


class DyTResidual(ResidualMethod):
    """``x + F(DyT(x))`` in every branch and ``DyT`` as the model's final norm (every LayerNorm replaced).

    ``a`` starts at ``alpha_init`` = 0.5 (the paper's default, used for its vision models), ``w = 1``, ``b = 0``.
    The paper tunes a per-branch start for large language models (a larger value in the DyT before attention than
    elsewhere); ``attn_alpha_init`` sets the attention-branch value when given, e.g.
    ``residual=DyTResidual(alpha_init=0.2, attn_alpha_init=0.8)``. Keys ``norm{i}.alpha``, ``norm{i}.weight``,
    ``norm{i}.bias`` and ``norm.*`` (the final DyT). ``init_value`` ignored; ``ls_placement`` must stay ``"both"``.
    """

    name = "dyt"

    def __init__(self, alpha_init: float = 0.5, attn_alpha_init: float | None = None) -> None:
        self.alpha_init = check_init_value(alpha_init, "alpha_init")
        self.attn_alpha_init = self.alpha_init if attn_alpha_init is None else check_init_value(
            attn_alpha_init, "attn_alpha_init")
        if self.alpha_init == 0 or self.attn_alpha_init == 0:
            raise ValueError(f"DyT alpha_init must be > 0, got {alpha_init!r} / {attn_alpha_init!r}")

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return DyT(ctx.dim, self.attn_alpha_init if branch == "attn" else self.alpha_init)

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return DyT(dim, self.alpha_init)

    def __repr__(self) -> str:
        return f"DyTResidual(alpha_init={self.alpha_init:g}, attn_alpha_init={self.attn_alpha_init:g})"
