"""ReZero residual: ``x ← x + α F(x)`` with no normalisation and α = 0 (Bachlechner et al. 2020, "ReZero is All
You Need: Fast Convergence at Large Depth", arXiv 2003.04887)."""

from __future__ import annotations

from torch import nn

from ...layers.layer_scale import ScalarScale
from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod
from ..initialization.torch_default_init import init_like_torch_defaults


class ReZero(ResidualMethod):
    """``x_{i+1} = x_i + α_i F_i(x_i)``, one learnable scalar per branch initialised to exactly 0; no LayerNorm.

    Every block is exactly the identity at initialisation. Keys ``ls1.gamma`` and ``ls2.gamma`` (shape ``(1,)``).

    **One α per branch, not per block.** The official code (``majumderb/rezero``, ``RZTXEncoderLayer``) multiplies
    both the attention and the MLP output by one shared ``resweight``. Here each branch has its own α, as in the
    paper's equation written per sub-layer, because a tied parameter would either appear twice in the state dict
    (``safetensors.torch.save_file`` refuses shared tensors) or hide one branch's scale from every tool that reads the
    ``ls{i}`` slots (folding, diagnostics, optimiser groups). At α = 0 both start identically; the difference is that
    the shared α receives the sum of the two branches' gradients. With per-branch α, ReZero and SkipInit at α = 0
    build the same block; both names are kept because the literature compares them.

    **Initialisation from the reference code.** The block's attention and MLP linears take PyTorch's default
    initialisation as in ``majumderb/rezero`` (Xavier-uniform packed ``qkv`` with zero bias, ``nn.Linear`` defaults
    elsewhere; :mod:`layerscale.residual.initialization.torch_default_init`), not the ViT truncated normal of the
    other methods.

    ``init_value`` (the LayerScale ε) is ignored: ReZero's α starts at 0 by definition. ``ls_placement`` must stay
    ``"both"``: a branch without α and without normalisation grows with depth. There is no final norm before the
    head: ReZero removes normalisation altogether (the official model stacks its layers without a final LayerNorm).
    """

    name = "rezero"

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return None

    def scale(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ScalarScale(0.0)

    def configure(self, block: nn.Module, ctx: BlockContext) -> None:
        init_like_torch_defaults(block)

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return None
