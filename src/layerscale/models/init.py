"""Weight initialisation shared by the model families (the timm / DeiT convention)."""

from __future__ import annotations

from torch import nn

__all__ = ["init_transformer_weights"]


def init_transformer_weights(root: nn.Module) -> None:
    """Initialise every sub-module of ``root`` (not ``root`` itself).

    Linear weights ``~ TruncNormal(0, 0.02)`` with zero biases, embeddings ``~ N(0, 0.02)``, and every other module
    that has ``reset_parameters`` (LayerNorm, convolutions, the LayerScale family) resets itself. A module that sets
    ``owns_init = True`` (for example a linear with a method-specific gain, such as T-Fixup's) always resets itself,
    so that a method's special initialisation survives and meta-device initialisation gives the same weights.
    """
    for module in root.modules():
        if module is root:
            continue
        if getattr(module, "owns_init", False):
            module.reset_parameters()
        elif isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        elif hasattr(module, "reset_parameters") and callable(module.reset_parameters):
            module.reset_parameters()
