"""A linear layer that owns a Xavier initialisation with a gain per block of output rows (T-Fixup, DeepNorm).

Methods that change the initialisation of a block's linears swap them for :class:`XavierLinear` in
``ResidualMethod.configure``. The swap keeps the state-dict keys (``attn.qkv.weight``, ``mlp.fc1.bias``, ...);
``owns_init = True`` makes the models' ``init_transformer_weights`` call its ``reset_parameters`` instead of the
default truncated normal, so normal construction, ``model.reset_parameters()`` and meta-device initialisation
(``to_empty`` then ``reset_parameters()`` on every module) all give the method's initialisation.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

__all__ = ["XavierLinear", "init_branch_linears"]

Distribution = Literal["uniform", "normal"]


class XavierLinear(nn.Linear):
    """``nn.Linear`` whose weight rows are split into ``len(gains)`` equal blocks, block ``j`` Xavier with ``gains[j]``.

    Each block is initialised as its own ``(out_features / len(gains)) × in_features`` matrix, so a packed
    ``qkv`` projection gets the fans of three separate ``d × d`` projections (Glorot & Bengio 2010):
    uniform ``U(±g·√(6 / (fan_in + fan_out)))`` or normal ``N(0, (g·√(2 / (fan_in + fan_out)))²)``. Biases are zero.
    """

    owns_init = True

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, gains: tuple[float, ...] = (1.0,),
                 distribution: Distribution = "uniform", device=None, dtype=None) -> None:
        gains = tuple(float(g) for g in gains)
        if not gains or any(not math.isfinite(g) or g <= 0 for g in gains):
            raise ValueError(f"gains must be finite numbers > 0, got {gains!r}")
        if out_features % len(gains):
            raise ValueError(f"out_features {out_features} is not divisible into {len(gains)} blocks of rows")
        if distribution not in ("uniform", "normal"):
            raise ValueError(f"distribution must be 'uniform' or 'normal', got {distribution!r}")
        # Set before nn.Linear.__init__, which calls reset_parameters().
        self.gains, self.distribution = gains, distribution
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)

    @classmethod
    def like(cls, linear: nn.Linear, gains: tuple[float, ...], distribution: Distribution) -> XavierLinear:
        """A fresh ``XavierLinear`` with the shape, bias, device and dtype of ``linear``."""
        return cls(linear.in_features, linear.out_features, linear.bias is not None, gains=gains,
                   distribution=distribution, device=linear.weight.device, dtype=linear.weight.dtype)

    def reset_parameters(self) -> None:
        init = nn.init.xavier_uniform_ if self.distribution == "uniform" else nn.init.xavier_normal_
        rows = self.out_features // len(self.gains)
        with torch.no_grad():
            for j, gain in enumerate(self.gains):
                init(self.weight[j * rows:(j + 1) * rows], gain=gain)
            if self.bias is not None:
                self.bias.zero_()

    def extra_repr(self) -> str:
        gains = ", ".join(f"{g:.4g}" for g in self.gains)
        return f"{super().extra_repr()}, gains=({gains}), distribution={self.distribution}"


def _swap(parent: nn.Module, name: str, gains: tuple[float, ...], distribution: Distribution) -> None:
    old = getattr(parent, name, None)
    if not isinstance(old, nn.Linear):
        raise ValueError(f"expected a linear layer {type(parent).__name__}.{name}, found {type(old).__name__}")
    setattr(parent, name, XavierLinear.like(old, gains, distribution))


def init_branch_linears(block: nn.Module, *, qk_gain: float, value_gain: float, proj_gain: float, mlp_gain: float,
                        distribution: Distribution) -> None:
    """Swap the attention (``qkv`` or ``q``/``k``/``v``, ``proj``) and MLP (``fc1``, ``fc2``) linears of ``block``.

    Query and key get ``qk_gain``, the value ``value_gain`` (only the v third of a packed ``qkv``), the output
    projection ``proj_gain`` and both MLP linears ``mlp_gain``. Other linears (talking-heads ``proj_l``/``proj_w``)
    keep the model's initialisation.
    """
    attn = block.attn
    if hasattr(attn, "qkv"):
        _swap(attn, "qkv", (qk_gain, qk_gain, value_gain), distribution)
    elif all(hasattr(attn, n) for n in ("q", "k", "v")):
        _swap(attn, "q", (qk_gain,), distribution)
        _swap(attn, "k", (qk_gain,), distribution)
        _swap(attn, "v", (value_gain,), distribution)
    else:
        raise ValueError(f"cannot find the query/key/value projections of {type(attn).__name__}")
    _swap(attn, "proj", (proj_gain,), distribution)
    _swap(block.mlp, "fc1", (mlp_gain,), distribution)
    _swap(block.mlp, "fc2", (mlp_gain,), distribution)
