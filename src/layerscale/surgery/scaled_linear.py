"""A linear layer followed by a per-channel LayerScale, for residual branches whose add we cannot reach.

Hugging Face's ``ViTLayer`` adds each residual inside its own ``forward``, so the only exact place to scale the
branch is the linear layer that produces it: ``y = γ ⊙ (x Wᵀ + b)`` (Touvron et al. 2021, CaiT, eq. 1 applied to
the branch output). The weight and bias keep their names (``weight``, ``bias``), the scale is ``layer_scale`` —
deliberately not ``gamma``: some transformers releases rename ``gamma`` keys to ``weight`` when loading.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers.layer_scale import check_init_value

__all__ = ["LayerScaledLinear"]


class LayerScaledLinear(nn.Linear):
    """``y = layer_scale ⊙ linear(x)`` with ``layer_scale ∈ R^out_features`` initialised to ``init_value``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, init_value: float = 1e-5,
                 device=None, dtype=None) -> None:
        self.init_value = check_init_value(init_value)
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.layer_scale = nn.Parameter(torch.full((out_features,), self.init_value, device=device, dtype=dtype))

    @classmethod
    def wrap(cls, linear: nn.Linear, init_value: float) -> LayerScaledLinear:
        """A ``LayerScaledLinear`` that reuses ``linear``'s weight and bias parameters (the same tensors)."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = linear.in_features, linear.out_features
        new.init_value = check_init_value(init_value)
        new.weight = linear.weight
        new.register_parameter("bias", linear.bias)
        new.layer_scale = nn.Parameter(torch.full((linear.out_features,), new.init_value,
                                                  device=linear.weight.device, dtype=linear.weight.dtype))
        new.train(linear.training)
        return new

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if hasattr(self, "layer_scale"):
            with torch.no_grad():
                self.layer_scale.fill_(self.init_value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias) * self.layer_scale

    def folded(self) -> nn.Linear:
        """A plain ``nn.Linear`` computing the same map: ``W ← diag(γ) W``, ``b ← γ ⊙ b`` (in place on the
        shared parameters, which the returned layer keeps)."""
        with torch.no_grad():
            self.weight.mul_(self.layer_scale.detach().unsqueeze(1))
            if self.bias is not None:
                self.bias.mul_(self.layer_scale.detach())
        return self.unscaled()

    def unscaled(self) -> nn.Linear:
        """A plain ``nn.Linear`` holding this layer's weight and bias parameters (the same tensors), without γ."""
        linear = nn.Linear.__new__(nn.Linear)
        nn.Module.__init__(linear)
        linear.in_features, linear.out_features = self.in_features, self.out_features
        linear.weight = self.weight
        linear.register_parameter("bias", self.bias)
        linear.train(self.training)
        return linear

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, init_value={self.init_value:g}"
