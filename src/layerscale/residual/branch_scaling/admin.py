"""Admin: Post-LN with a profiled per-channel weight on the skip path (Liu, Liu, Gao, Chen and Han 2020,
"Understanding the Difficulty of Training Transformers", EMNLP; arXiv 2004.08249, §4 "Adaptive Model
Initialization"; official code LiyuanLucasLiu/Transformer-Clinic, ``--init-type adaptive-profiling``).

Every sub-layer ``i`` (the attention and the MLP branch of every block, counted through the whole stack) computes::

    x_i = LN(b_i),    b_i = x_{i−1} ⊙ ω_i + F_i(x_{i−1})

with ``ω_i ∈ R^d`` learnable. The paper initialises ``ω_i = √(Σ_{j<i} Var[F_j(x_{j−1})])`` from a profiling forward
pass, so that the dependency of every sub-layer on its residual branch starts as in Pre-LN. The official profiling
computes this sum as a recursion that also counts the embedding, which is what :func:`profile_admin` does::

    ω_1 = 1,    ω_{i+1} = √(Var[ω_i ⊙ x_{i−1}] + Var[F_i(x_{i−1})])

(every ``Var`` over all elements of the profiling batch, population variance; every entry of ``ω_i`` gets the same
value). Since ``x_{i−1}`` is a LayerNorm output (variance 1 at initialisation), ``ω_{i+1}² ≈ ω_i² + Var[F_i]``: the
paper's sum, with the embedding's variance as the first term.

**The profiling batch.** :func:`profile_admin` takes the batch you give it (your data is best). Without one it
draws a fixed synthetic batch from its own generator seeded with ``seed`` (default 0), never touching the global
random state: images ``N(0, 1)`` of the model's input size (``PROFILE_BATCH`` = 8 of them) for ViT / CaiT, or
uniformly random tokens (8 sequences of ``min(block_size, 64)`` tokens) for GPT. The pass runs in eval mode (no
dropout, no stochastic depth) without gradients, in float32 statistics. The models run it automatically at the end
of ``reset_parameters()`` (so at construction) with that default batch; on the meta device there is nothing to
measure and ω stays unset until you materialise the model (``to_empty``) and call ``model.reset_parameters()`` or
:func:`profile_admin` — the same seeded batch then gives the same ω as a normal construction.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod

__all__ = ["Admin", "AdminOmega", "PROFILE_BATCH", "default_profiling_batch", "profile_admin"]

#: Samples in the default synthetic profiling batch.
PROFILE_BATCH = 8
#: Tokens per sequence in the default batch for a language model (at most its ``block_size``).
PROFILE_TOKENS = 64


class AdminOmega(nn.Module):
    """The skip-path weight ``x ⊙ ω`` with ``ω ∈ R^dim`` (key ``omega``), reset to 1 until profiled."""

    def __init__(self, dim: int, device=None, dtype=None) -> None:
        super().__init__()
        self.dim = dim
        self.omega = nn.Parameter(torch.empty(dim, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """ω = 1; :func:`profile_admin` (run by the models after their own reset) sets the profiled value."""
        with torch.no_grad():
            self.omega.fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.omega

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def default_profiling_batch(model: nn.Module, seed: int = 0, batch_size: int = PROFILE_BATCH) -> torch.Tensor:
    """The fixed synthetic batch of the module docstring for a ViT / CaiT (``patch_embed``) or a GPT (``wte``)."""
    generator = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    patch_embed = getattr(model, "patch_embed", None)
    if patch_embed is not None:
        proj = patch_embed.proj
        size = patch_embed.img_size if isinstance(patch_embed.img_size, tuple) else (patch_embed.img_size,) * 2
        images = torch.randn(batch_size, proj.in_channels, *size, generator=generator)
        return images.to(device=device, dtype=proj.weight.dtype)
    wte = getattr(model, "wte", None)
    if isinstance(wte, nn.Embedding):
        length = min(getattr(model, "block_size", PROFILE_TOKENS), PROFILE_TOKENS)
        return torch.randint(0, wte.num_embeddings, (batch_size, length), generator=generator).to(device)
    raise ValueError(f"no default Admin profiling batch for a {type(model).__name__}; pass batch= to profile_admin")


def _variance(t: torch.Tensor) -> float:
    return t.detach().double().var(unbiased=False).item()


@torch.no_grad()
def profile_admin(model: nn.Module, batch: torch.Tensor | None = None, *, seed: int = 0) -> list[float]:
    """Set every Admin ω of ``model`` from one profiling forward pass; return the values in sub-layer order.

    ``batch`` is the model's input (images or tokens); ``None`` means :func:`default_profiling_batch` with ``seed``.
    The recursion is the module docstring's. The model's training mode is restored afterwards. Raises
    ``ValueError`` when the model has no Admin skip weights or is on the meta device.
    """
    owners = [m for m in model.modules() if isinstance(getattr(m, "skip1", None), AdminOmega)]
    if not owners:
        raise ValueError(f"{type(model).__name__} has no Admin skip weights to profile (build it with "
                         f"residual='admin')")
    if any(p.is_meta for p in model.parameters()):
        raise ValueError("cannot profile Admin on the meta device: materialise the model first (to_empty), then call "
                         "model.reset_parameters() or profile_admin(model)")
    if batch is None:
        batch = default_profiling_batch(model, seed)
    ratio, values, outputs, handles = 1.0, [], {}, []

    def remember(key):
        def hook(module, args, output):
            outputs[key] = output
        return hook

    def set_omega(key):
        def hook(module, args):
            nonlocal ratio
            x = args[0]
            module.omega.fill_(ratio)
            values.append(ratio)
            ratio = math.sqrt(_variance(x * module.omega) + _variance(outputs.pop(key)))
        return hook

    for owner in owners:
        for i, branch in ((1, "attn"), (2, "mlp")):
            key = (id(owner), i)
            handles.append(getattr(owner, branch).register_forward_hook(remember(key)))
            handles.append(getattr(owner, f"skip{i}").register_forward_pre_hook(set_omega(key)))
    was_training = model.training
    try:
        model.eval()
        model(batch)
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return values


class Admin(ResidualMethod):
    """Post-LN, ``x ← LN(x ⊙ ω + F(x))``, with ω (keys ``skip1.omega``, ``skip2.omega``) set by profiling.

    No input norm, ``post_norm{i}`` after each update, no final norm (the stack ends normalised, as in Post-LN).
    ω is profiled when a model calls :meth:`prepare_model` at the end of ``reset_parameters()``; a lone
    :class:`~layerscale.layers.Block` keeps ω = 1 until :func:`profile_admin` runs on the model around it.
    ``init_value`` ignored; ``ls_placement`` must stay ``"both"``.
    """

    name = "admin"

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return None

    def post_norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return ctx.norm_layer(ctx.dim)

    def skip_scale(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        return AdminOmega(ctx.dim)

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return None

    def prepare_model(self, model: nn.Module) -> None:
        """Profile ω on the default seeded batch, unless the model is on the meta device (see the module docstring)."""
        if not any(p.is_meta for p in model.parameters()):
            profile_admin(model)
