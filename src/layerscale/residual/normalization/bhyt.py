"""BHyT, Bounded Hyperbolic Tanh: Pre-LN with both per-block norms replaced by a bounded, input-scaled tanh
("Bounded Hyperbolic Tangent: A Stable and Efficient Alternative to Pre-Layer Normalization in Large Language
Models", ICML 2026; equations, constants and initialisation learned from the authors' official code,
github.com/MLAI-Yonsei/BHyT at commit e170c9b, read 2026-12-06; nothing copied).

For the input ``x`` of a transformer block (per token, over the ``d`` features)::

    σ²      = mean(x²)                                      (computed once per block, in float32 at least)
    r₁      = κ⁻¹ / √(σ² + 1e-6)
    x'      = x + Attn( γ₁ ⊙ tanh(λ₁ r₁ x) )
    σ̂²      = σ² + c · sg(λ₁)² / κ²                          (the variance of x', approximated, not measured)
    r₂      = κ⁻¹ / √(σ̂² + 1e-6)
    x''     = x' + MLP( γ₂ ⊙ tanh(λ₂ r₂ x') )

with ``c = ‖W_O W_V‖_F² / (T·d)`` from the block's value and output projections and the number ``T`` of tokens
attended over, without gradient, at the first forward and again from the current weights every
``max(1, min(1000, ⌊S/50⌋))`` optimizer steps of a run of ``S`` steps (50 updates); ``sg`` stops the gradient.
Sources, by file and function:
``models/hf_src/llama/modeling_llama.py`` — ``BHyT.forward`` (``γ ⊙ tanh(λ · rstd · x)``; ``γ = 1``, a learnable
scalar ``λ``), ``LayerWiseVarApproxParrallel.compute_rstd1`` / ``compute_rstd2`` and ``LayerWiseVarApprox.forward``
(``r₁``, ``σ̂²`` with the "baseline" method, ``eps = 1e-6``, ``λ₁`` detached), ``LlamaDecoderLayer.__init__``
(``κ = bhyt_kappa``, default 10, no schedule), ``LlamaDecoderLayer.update_scaler`` (``c``, computed while
``_c_attn_ready`` is false), ``LlamaDecoderLayer.forward`` (the block above) and ``LlamaModel.__init__`` /
``forward`` (the final norm); ``src/llamafactory/train/callbacks.py`` — ``UpdateScalerCallback`` (``update_scaler``
on every layer at each step that is a multiple of ``max(min_interval = 1, min(max_interval = 1000, max_steps //
target_updates = 50))``, ``recompute_immediately``), which ``src/llamafactory/train/tuner.py`` adds to every BHyT
pre-training run (a model path ending ``_bhyt_pt``, as ``scripts/bhyt/pt_bhyt_sweep.sh`` gives);
``models/hf_src/llama/bhyt_triton.py`` (the same two norms fused for decoding);
``config/norm_config_bhyt*.yaml`` (``learnable_lam: True``) and ``scripts/bhyt/pt_bhyt_sweep.sh`` (the λ triples
``(λ₁, λ₂, λ_final) ∈ {(2, 1, 0), (3, 3, 0)}``; defaults here: the first).

Bounded: every norm output satisfies ``|y| ≤ |γ|`` whatever the stream's magnitude. Efficient: the MLP-branch norm
reads the statistic its block's attention-branch norm computed (:class:`BHyTInputNorm` records it,
:class:`BHyTPostNorm` uses it), so each block reduces over its features once.

``bhytline`` (the repository's "line-by-line" variant) is the same equations — ``LayerWiseVarApprox.forward``
computes ``r₁`` and ``r₂`` together before attention, the parallel ``bhyt`` computes ``r₂`` on a second CUDA
stream during attention — so it is not a separate method here. ``bhytstar`` (``BHyT_Star``: each norm its own
statistic) is not implemented.

The updates of ``c`` run in :meth:`BHyTResidual.after_optimizer_step`, which ``layerscale train`` calls after every
applied step (a loop of one's own calls :func:`layerscale.residual.after_optimizer_step`; without it ``c`` keeps
its first value, as ``gain_updates=0`` asks). Until 2026-12-08 ``c`` was computed once and never updated.

Choices where the code's setting differs from ours (docs/methods.md, "BHyT"): ``c`` uses the value rows of our
fused ``qkv`` (or ``v`` in class attention) and ``proj`` and ignores their biases (Llama has none); it is computed at
the first forward, from the weights then and that forward's token count (the official default when the config
gives no ``seq_len``; the updates keep that count), and kept in the state dict (``norm2.attn_variance_gain``) so
that a reloaded model is the same function. The final norm stays the model's own when ``final_lam = 0`` (the
official value in both triples, which keeps Llama's RMSNorm); ``final_lam > 0`` uses a BHyT norm with its own
statistic, as the official code does.
"""

from __future__ import annotations

import torch
from torch import nn

from ...layers.norms import NormFactory
from ..base import BlockContext, Branch, ResidualMethod

__all__ = ["BHyTInputNorm", "BHyTPostNorm", "BHyTResidual", "BoundedTanh", "attention_variance_gain",
           "gain_update_interval"]

#: κ, the official default ``bhyt_kappa``: the tanh's argument has RMS ``λ/κ`` (0.2 for λ = 2), a near-linear range.
KAPPA = 10.0
#: The ε inside every square root of the official code.
EPS = 1e-6
#: How many times a run updates ``c`` (``UpdateScalerCallback``'s ``target_updates``), and the longest interval.
GAIN_UPDATES, MAX_GAIN_INTERVAL = 50, 1000
_REDUCED_FLOATS = (torch.float16, torch.bfloat16)


def mean_square(x: torch.Tensor) -> torch.Tensor:
    """``mean(x²)`` over the last dimension, kept, in float32 for half-precision inputs (as the official code)."""
    x = x.float() if x.dtype in _REDUCED_FLOATS else x
    return x.square().mean(-1, keepdim=True)


def _whole(weight: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a parameter sharded by FSDP (a collective: every rank calls it), else the parameter."""
    return weight.full_tensor() if hasattr(weight, "full_tensor") else weight


def attention_variance_gain(attn: nn.Module, tokens: int) -> torch.Tensor:
    """``c = ‖W_O W_V‖_F² / (T·d)`` for an attention branch of ours (fused ``qkv`` or separate ``v``), no gradient."""
    with torch.no_grad():
        proj = _whole(attn.proj.weight)
        dim = proj.shape[0]
        value = _whole(attn.v.weight) if hasattr(attn, "v") else _whole(attn.qkv.weight)[2 * dim:3 * dim]
        product = proj.double() @ value.double()
        return product.square().sum() / (tokens * dim)


def gain_update_interval(total_steps: int, updates: int = GAIN_UPDATES) -> int:
    """Steps between two updates of ``c`` in a run of ``total_steps``: ``max(1, min(1000, total_steps // updates))``
    (``UpdateScalerCallback.on_train_begin``)."""
    return max(1, min(MAX_GAIN_INTERVAL, total_steps // updates))


class BoundedTanh(nn.Module):
    """``y = γ ⊙ tanh(λ · r · x)`` for a per-token scale ``r``; keys ``weight`` (``γ``, init 1), ``lam`` (``λ``)."""

    owns_init = True

    def __init__(self, dim: int, lam_init: float, kappa: float = KAPPA, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.dim, self.lam_init, self.kappa = dim, float(lam_init), float(kappa)
        self.weight = nn.Parameter(torch.empty(dim, **factory))
        self.lam = nn.Parameter(torch.empty(1, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``γ = 1``, ``λ = lam_init`` (``BHyT.reset_parameters`` of the official code)."""
        with torch.no_grad():
            self.weight.fill_(1.0)
            self.lam.fill_(self.lam_init)

    def bounded(self, x: torch.Tensor, mean_sq: torch.Tensor) -> torch.Tensor:
        """``γ ⊙ tanh(λ x / (κ √(mean_sq + eps)))``."""
        scale = (torch.rsqrt(mean_sq + EPS) / self.kappa).to(x.dtype)
        return self.weight * torch.tanh(self.lam * scale * x)

    def extra_repr(self) -> str:
        return f"{self.dim}, lam_init={self.lam_init:g}, kappa={self.kappa:g}"


class BHyTInputNorm(BoundedTanh):
    """The attention-branch norm: scales by the exact statistic of its input and records it for the block.

    Also the final norm when ``final_lam > 0`` (its own statistic, ``LlamaModel.forward``).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean_sq = mean_square(x)
        self.block_mean_square = mean_sq  # read by the block's BHyTPostNorm in this same forward
        return self.bounded(x, mean_sq)


class BHyTPostNorm(BoundedTanh):
    """The MLP-branch norm: no statistic of its own; ``σ̂² = σ² + c λ₁² / κ²`` from the block's input norm.

    Buffer ``attn_variance_gain`` (``c``; negative until the first forward computes it; :meth:`update_gain`
    recomputes it from the current weights). :meth:`attach` links the block's input norm and attention (plain
    references, not sub-modules: no duplicate keys).
    """

    def __init__(self, dim: int, lam_init: float, kappa: float = KAPPA, device=None, dtype=None) -> None:
        super().__init__(dim, lam_init, kappa, device=device, dtype=dtype)
        self.register_buffer("attn_variance_gain", torch.full((), -1.0, device=device, dtype=torch.float64))
        self._block: tuple[BHyTInputNorm, nn.Module] | None = None
        self._gain_known = False  # whether attn_variance_gain holds c (checked once, not at every forward)
        self._gain_tokens: int | None = None  # T of the forward that first read c (the updates keep it)

    def reset_parameters(self) -> None:
        """As :class:`BoundedTanh`, and ``c`` to be computed again at the next forward."""
        super().reset_parameters()
        if hasattr(self, "attn_variance_gain"):
            self.attn_variance_gain.fill_(-1.0)
            self._gain_known = False

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self._gain_known = False  # a loaded c is used as it is; a negative one is computed at the next forward

    def attach(self, input_norm: BHyTInputNorm, attn: nn.Module) -> None:
        """Read the statistic of ``input_norm`` and compute ``c`` from ``attn`` (the same block's)."""
        self._block = (input_norm, attn)

    def approximate_mean_square(self, tokens: int) -> torch.Tensor:
        """``σ̂² = σ² + c · sg(λ₁)² / κ²`` for the first ``tokens`` rows of the block input's statistic."""
        if self._block is None:
            raise ValueError("BHyTPostNorm is not attached to a block (BHyTResidual.configure attaches it)")
        input_norm, attn = self._block
        mean_sq = getattr(input_norm, "block_mean_square", None)
        if mean_sq is None:
            raise ValueError("BHyTPostNorm ran before its block's input norm: the block statistic is missing")
        input_norm.block_mean_square = None  # used once: keep no graph alive between forwards
        if not self._gain_known:
            self._gain_tokens = mean_sq.shape[-2]
            if float(self.attn_variance_gain) < 0:
                self.attn_variance_gain.copy_(attention_variance_gain(attn, self._gain_tokens))
            self._gain_known = True
        gain = self.attn_variance_gain.to(mean_sq.dtype)
        return mean_sq[..., :tokens, :] + gain * input_norm.lam.detach().to(mean_sq.dtype).square() / self.kappa ** 2

    def update_gain(self) -> None:
        """``c`` again from the attention's current weights and the token count it was first computed for
        (``LlamaDecoderLayer.update_scaler``); before any forward has read it, at the next forward."""
        if self._block is None:
            raise ValueError("BHyTPostNorm is not attached to a block (BHyTResidual.configure attaches it)")
        if self._gain_tokens is None:
            self.attn_variance_gain.fill_(-1.0)
            self._gain_known = False
        else:
            self.attn_variance_gain.copy_(attention_variance_gain(self._block[1], self._gain_tokens))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bounded(x, self.approximate_mean_square(x.shape[-2]))


class BHyTResidual(ResidualMethod):
    """``residual="bhyt"``: Pre-LN's two per-block norms replaced by BHyT, statistics computed once per block.

    ``input_lam`` ``λ₁`` (default 2), ``post_lam`` ``λ₂`` (default 1), ``final_lam`` (default 0: the model's own
    final norm), ``kappa`` ``κ`` (default 10), ``gain_updates`` (default 50: ``c`` recomputed every
    :func:`gain_update_interval` steps; 0: computed once, at the first forward), e.g.
    ``residual=BHyTResidual(input_lam=3.0, post_lam=3.0)``. Keys
    ``norm{i}.weight``, ``norm{i}.lam`` and ``norm2.attn_variance_gain``. ``init_value`` is ignored;
    ``ls_placement`` must stay ``"both"``.
    """

    name = "bhyt"

    def __init__(self, input_lam: float = 2.0, post_lam: float = 1.0, final_lam: float = 0.0,
                 kappa: float = KAPPA, gain_updates: int = GAIN_UPDATES) -> None:
        for label, value in (("input_lam", input_lam), ("post_lam", post_lam), ("kappa", kappa)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"{label} must be a finite number > 0, got {value!r}")
        if isinstance(final_lam, bool) or not isinstance(final_lam, (int, float)) or not 0 <= final_lam < float("inf"):
            raise ValueError(f"final_lam must be a finite number >= 0, got {final_lam!r}")
        if isinstance(gain_updates, bool) or not isinstance(gain_updates, int) or gain_updates < 0:
            raise ValueError(f"gain_updates must be a whole number >= 0 (0: c computed once), got {gain_updates!r}")
        self.gain_updates = gain_updates
        self.input_lam, self.post_lam, self.final_lam, self.kappa = (float(input_lam), float(post_lam),
                                                                      float(final_lam), float(kappa))

    def norm(self, ctx: BlockContext, branch: Branch) -> nn.Module | None:
        if branch == "attn":
            return BHyTInputNorm(ctx.dim, self.input_lam, self.kappa)
        return BHyTPostNorm(ctx.dim, self.post_lam, self.kappa)

    def configure(self, block: nn.Module, ctx: BlockContext) -> None:
        block.norm2.attach(block.norm1, block.attn)

    def final_norm(self, norm_layer: NormFactory, dim: int) -> nn.Module | None:
        return norm_layer(dim) if self.final_lam == 0 else BHyTInputNorm(dim, self.final_lam, self.kappa)

    def after_optimizer_step(self, model: nn.Module, step: int, total_steps: int) -> None:
        """``c`` of every block recomputed from its current weights when ``step`` is a multiple of
        :func:`gain_update_interval` (``UpdateScalerCallback.on_step_end``); nothing with ``gain_updates=0``."""
        if self.gain_updates and step % gain_update_interval(total_steps, self.gain_updates) == 0:
            for module in model.modules():
                if isinstance(module, BHyTPostNorm):
                    module.update_gain()

    def __repr__(self) -> str:
        return (f"BHyTResidual(input_lam={self.input_lam:g}, post_lam={self.post_lam:g}, "
                f"final_lam={self.final_lam:g}, kappa={self.kappa:g}, gain_updates={self.gain_updates})")
