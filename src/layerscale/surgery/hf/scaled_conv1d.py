"""GPT-2's ``Conv1D`` (a linear layer stored transposed) followed by a per-channel LayerScale.

Hugging Face's ``GPT2Block`` adds each residual inside its own ``forward``, so the exact place to scale a branch is
the layer that produces it, ``attn.c_proj`` / ``mlp.c_proj``: ``y = γ ⊙ (x W + b)`` with ``W ∈ R^{nx×nf}``
(Touvron et al. 2021, CaiT, eq. 1, applied to the branch output; dropout after it commutes with the diagonal
scale). ``weight`` and ``bias`` keep their names and layout, the scale is ``layer_scale`` (not ``gamma``, which
some transformers releases rename when loading), as in :class:`~layerscale.surgery.LayerScaledLinear`.
"""

from __future__ import annotations

import torch
from torch import nn

from ...layers.layer_scale import check_init_value
from ..peers import loaded_classes

__all__ = ["LayerScaledConv1D"]


class LayerScaledConv1D(nn.Module):
    """``y = layer_scale ⊙ (x · weight + bias)``, ``weight`` of shape ``(nx, nf)`` as in transformers' ``Conv1D``;
    build it with :meth:`wrap` around an existing ``Conv1D`` (the same parameter tensors)."""

    def __init__(self, nf: int, nx: int, init_value: float = 1e-5, device=None, dtype=None) -> None:
        super().__init__()
        self.nf, self.nx = nf, nx
        self.init_value = check_init_value(init_value)
        self.weight = nn.Parameter(torch.empty(nx, nf, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(nf, device=device, dtype=dtype))
        self.layer_scale = nn.Parameter(torch.full((nf,), self.init_value, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation (``N(0, 0.02)`` weight, zero bias) and ``layer_scale = init_value``."""
        with torch.no_grad():
            nn.init.normal_(self.weight, std=0.02)
            self.bias.zero_()
            self.layer_scale.fill_(self.init_value)

    @classmethod
    def wrap(cls, conv: nn.Module, init_value: float) -> LayerScaledConv1D:
        """A ``LayerScaledConv1D`` sharing ``conv``'s ``weight`` and ``bias`` (a transformers ``Conv1D``)."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.nf, new.nx = conv.nf, conv.nx
        new.init_value = check_init_value(init_value)
        new.weight = conv.weight
        new.bias = conv.bias
        new.layer_scale = nn.Parameter(torch.full((conv.nf,), new.init_value, device=conv.weight.device,
                                                  dtype=conv.weight.dtype))
        new.train(conv.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.shape[:-1] + (self.nf,)
        y = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return y.view(size_out) * self.layer_scale

    def folded(self) -> nn.Module:
        """A transformers ``Conv1D`` computing the same map: ``W ← W diag(γ)`` (columns), ``b ← γ ⊙ b``, in
        place on the shared parameters, which the returned layer keeps."""
        conv_type = self._conv1d_type("fold")
        with torch.no_grad():
            gamma = self.layer_scale.detach()
            self.weight.mul_(gamma.unsqueeze(0))
            self.bias.mul_(gamma)
        return self._plain(conv_type)

    def unscaled(self) -> nn.Module:
        """A transformers ``Conv1D`` holding this layer's weight and bias parameters (the same tensors), without γ."""
        return self._plain(self._conv1d_type("split"))

    @staticmethod
    def _conv1d_type(action: str) -> type:
        conv_types = loaded_classes("transformers.pytorch_utils", "Conv1D")
        if not conv_types:
            raise ValueError(f"cannot {action} a LayerScaledConv1D without transformers loaded (it restores a Conv1D)")
        return conv_types[0]

    def _plain(self, conv_type: type) -> nn.Module:
        conv = conv_type.__new__(conv_type)
        nn.Module.__init__(conv)
        conv.nf, conv.nx = self.nf, self.nx
        conv.weight = self.weight
        conv.bias = self.bias
        conv.train(self.training)
        return conv

    def extra_repr(self) -> str:
        return f"nf={self.nf}, nx={self.nx}, init_value={self.init_value:g}"
