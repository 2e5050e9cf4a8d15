"""LayerScale and its relatives: learnable per-channel, per-head and scalar scales on residual branches.

LayerScale (Touvron et al. 2021, "Going deeper with Image Transformers", arXiv 2103.17239) multiplies the output
of every residual branch by a learnable diagonal ``diag(γ)``::

    x_{l+1} = x_l + γ ⊙ F(LN(x_l)),      γ ∈ R^d initialised to ε

so that a deep Pre-LN transformer starts close to the identity map and each block grows in during training.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from .fused import scaled_residual_add

__all__ = [
    "init_value_for_depth",
    "check_init_value",
    "LayerScale",
    "LayerScale2d",
    "HeadScale",
    "ScalarScale",
]


def init_value_for_depth(depth: int) -> float:
    """The LayerScale initial value ε as a function of the number of blocks, after the CaiT paper.

    The paper (Touvron et al. 2021, §3) gives ε = 0.1 up to depth 18, ε = 1e-5 at depth 24 and ε = 1e-6 beyond.
    It says nothing of depths 19–23: extending 1e-5 down to 19 (so ε = 1e-5 for 18 < depth ≤ 24) is this library's
    choice. The official CaiT code departs from the text for some models (XXS36 uses 1e-5); the named models in
    :mod:`layerscale.models` carry their official values.
    """
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise ValueError(f"depth must be a positive int, got {depth!r}")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    if depth <= 18:
        return 0.1
    if depth <= 24:
        return 1e-5
    return 1e-6


def check_init_value(init_value: float, name: str = "init_value") -> float:
    """Return ``float(init_value)`` or raise ``ValueError`` if it is negative, not finite, or not a real number
    (strings such as ``"0.1"`` and booleans are refused, not converted)."""
    if isinstance(init_value, (bool, str, bytes)) or not isinstance(init_value, numbers.Real):
        raise ValueError(f"{name} must be a finite number >= 0, got {init_value!r} ({type(init_value).__name__})")
    value = float(init_value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {init_value!r}")
    return value


def _init_value_or_alias(init_value: float, init_values: float | None, default: float) -> float:
    """``init_value``, or timm's spelling ``init_values`` when it is given; ``init_values`` beside an
    ``init_value`` other than the ``default`` (so: given too) and different is a ``ValueError`` naming the two."""
    if init_values is None:
        return init_value
    if init_value != default and init_value != init_values:
        raise ValueError(f"init_value={init_value!r} and init_values={init_values!r} disagree; init_values is "
                         f"timm's spelling of init_value: pass one of them")
    return init_values


class _ScaleBase(nn.Module):
    """A learnable scale ``gamma`` of a fixed shape, filled with ``init_value`` by ``reset_parameters``."""

    def __init__(self, shape: tuple[int, ...], init_value: float, device=None, dtype=None) -> None:
        super().__init__()
        self.init_value = check_init_value(init_value)
        self.gamma = nn.Parameter(torch.empty(shape, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Fill ``gamma`` with ``init_value`` (works after ``to_empty()`` from the meta device)."""
        with torch.no_grad():
            self.gamma.fill_(self.init_value)

    def extra_repr(self) -> str:
        return f"{tuple(self.gamma.shape)}, init_value={self.init_value:g}"


def _check_size(name: str, value) -> int:
    """``value`` if it is a positive int (not a bool), else a one-line ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_update_shapes(owner: str, residual: torch.Tensor, branch: torch.Tensor, width: int | None,
                         keep_mask: torch.Tensor | None) -> None:
    """A one-line ``ValueError`` naming the shapes unless ``residual`` and ``branch`` have one shape ``(..., width)``
    (any last dimension when ``width`` is ``None``) and ``keep_mask`` is ``None`` or ``(B, 1, ..., 1)`` (or all
    ones): shape comparisons only, no tensor work."""
    shape = residual.shape
    if branch.shape != shape or residual.dim() < 1 or (width is not None and shape[-1] != width):
        last = "D" if width is None else width
        raise ValueError(f"{owner}.add_to expected residual and branch of one shape (..., {last}), got residual "
                         f"{tuple(shape)} and branch {tuple(branch.shape)}")
    if keep_mask is not None and (keep_mask.dim() != len(shape) or keep_mask.shape[0] not in (1, shape[0])
                                  or any(size != 1 for size in keep_mask.shape[1:])):
        expected = (shape[0],) + (1,) * (len(shape) - 1)
        raise ValueError(f"{owner}.add_to expected keep_mask of shape {expected} (one factor per sample) for residual "
                         f"{tuple(shape)}, got {tuple(keep_mask.shape)}")


class _ChannelsFirstScale(_ScaleBase):
    """A scale over dimension 1 of 4-D inputs: ``y[:, c] = γ_c · x[:, c]``; ``layout`` names the expected shape
    in errors, with ``{}`` for the size of dimension 1."""

    layout = "(N, {}, H, W)"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = self.gamma.shape[0]
        if x.dim() != 4 or x.shape[1] != size:
            raise ValueError(f"{type(self).__name__} expected {self.layout.format(size)}, got input of shape "
                             f"{tuple(x.shape)}")
        return x * self.gamma.view(1, -1, 1, 1)


class LayerScale(_ScaleBase):
    """Per-channel scale over the last dimension: ``y = γ ⊙ x`` with ``γ ∈ R^dim`` initialised to ``init_value``.

    ``add_to(residual, branch, keep_mask)`` computes ``residual + γ ⊙ branch`` (times an optional per-sample
    stochastic-depth mask) in one fused pass with a lean backward
    (:func:`~layerscale.layers.fused.scaled_residual_add`); blocks use it for the residual update.
    State-dict key: ``gamma`` (as in timm's ``ls1.gamma``). ``init_values`` is timm's spelling of ``init_value``
    (``LayerScale(64, init_values=1e-5)`` as with ``timm.layers.LayerScale``); default ε = 1e-5.
    """

    def __init__(self, dim: int, init_value: float = 1e-5, device=None, dtype=None, *,
                 init_values: float | None = None) -> None:
        super().__init__((_check_size("dim", dim),), _init_value_or_alias(init_value, init_values, 1e-5),
                         device=device, dtype=dtype)
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"LayerScale expected last dimension {self.dim}, got input of shape {tuple(x.shape)}")
        return x * self.gamma

    def add_to(self, residual: torch.Tensor, branch: torch.Tensor, keep_mask: torch.Tensor | None = None):
        """``residual + keep_mask ⊙ γ ⊙ branch`` in one fused kernel: ``residual`` and ``branch`` of one shape
        ``(..., dim)``, ``keep_mask`` ``None`` or ``(B, 1, ..., 1)``; other shapes are a one-line ``ValueError``."""
        _check_update_shapes("LayerScale", residual, branch, self.dim, keep_mask)
        return scaled_residual_add(residual, branch, self.gamma, keep_mask)


class LayerScale2d(_ChannelsFirstScale):
    """Channels-first LayerScale for ``(N, C, H, W)`` tensors: ``y[n, c] = γ_c · x[n, c]``, ``γ ∈ R^C``
    (``init_values``: timm's spelling of ``init_value``, as with ``timm.layers.LayerScale2d``; default 1e-5)."""

    def __init__(self, dim: int, init_value: float = 1e-5, device=None, dtype=None, *,
                 init_values: float | None = None) -> None:
        super().__init__((_check_size("dim", dim),), _init_value_or_alias(init_value, init_values, 1e-5),
                         device=device, dtype=dtype)
        self.dim = dim


class HeadScale(_ChannelsFirstScale):
    """Per-head scale on multi-head outputs of shape ``(B, H, N, head_dim)``: ``y[:, h] = γ_h · x[:, h]``.

    Applied to each head's output before the heads are merged and projected, so that head ``h``'s contribution
    to the branch is ``γ_h W_h o_h`` where ``W_h`` are the projection columns of head ``h``.
    """

    layout = "(B, {}, N, head_dim)"

    def __init__(self, num_heads: int, init_value: float = 1e-5, device=None, dtype=None) -> None:
        super().__init__((_check_size("num_heads", num_heads),), init_value, device=device, dtype=dtype)
        self.num_heads = num_heads


class ScalarScale(_ScaleBase):
    """One learnable scalar per branch: ``y = α x`` (CaiT's scalar ablation, ReZero, SkipInit). Key: ``gamma``."""

    def __init__(self, init_value: float = 0.0, device=None, dtype=None) -> None:
        super().__init__((1,), init_value, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma

    def add_to(self, residual: torch.Tensor, branch: torch.Tensor, keep_mask: torch.Tensor | None = None):
        """``residual + keep_mask · α · branch`` in one fused kernel (see :func:`~.fused.scaled_residual_add`), with
        the shapes of :meth:`LayerScale.add_to` (any last dimension)."""
        _check_update_shapes("ScalarScale", residual, branch, None, keep_mask)
        return scaled_residual_add(residual, branch, self.gamma, keep_mask)
