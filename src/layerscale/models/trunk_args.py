"""The hyper-parameters every model family (ViT, CaiT, GPT) shares, checked and resolved in one place."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..layers.norms import NormFactory, norm_factory
from ..residual.base import ResidualMethod
from ..residual.registry import resolve_residual
from .timm_api import resolve_init_value_alias
from .validation import (
    MAX_DEPTH,
    check_heads,
    check_mlp_ratio,
    check_positive_int,
    check_positive_number,
    check_rate,
)

__all__ = ["INIT_VALUE_SPELLINGS", "TrunkArgs", "init_value_spellings", "resolve_trunk_args"]


class TrunkArgs(NamedTuple):
    """What a model's trunk is built from: the LayerScale ε (``None``: the depth rule), the residual method and
    the norm factory."""

    init_value: float | None
    method: ResidualMethod
    norm_layer: NormFactory


def resolve_trunk_args(*, depth: int, embed_dim: int, num_heads: int, drop_rate: float, residual: str,
                       norm: str, norm_eps: float, init_value: float | None, init_values: float | None,
                       attn_drop_rate: float = 0.0, mlp_ratio: float = 4.0) -> TrunkArgs:
    """Check the shared hyper-parameters (each bad one a one-line ``ValueError`` naming it) and resolve them.

    ``init_values`` is timm's spelling of ``init_value`` (giving both is an error); ``residual`` is a name from
    :func:`layerscale.list_residuals`; ``norm`` is ``"layernorm"`` or ``"rmsnorm"``; ``norm_eps`` a finite number
    > 0; ``drop_rate`` and ``attn_drop_rate`` numbers in ``[0, 1)``; ``mlp_ratio`` a finite number > 0 whose hidden
    width ``int(embed_dim * mlp_ratio)`` is in ``[1, MAX_MLP_HIDDEN]`` (:mod:`layerscale.models.validation`).
    """
    init_value = resolve_init_value_alias(init_value, init_values)
    check_positive_int("depth", depth, MAX_DEPTH)
    check_heads(embed_dim, num_heads)
    check_mlp_ratio(embed_dim, mlp_ratio)
    check_rate("drop_rate", drop_rate)
    check_rate("attn_drop_rate", attn_drop_rate)
    norm_eps = check_positive_number("norm_eps", norm_eps)
    return TrunkArgs(init_value, resolve_residual(residual), norm_factory(norm, norm_eps))


#: Other libraries' names of ``init_value`` accepted as ``from_pretrained`` overrides: Hugging Face configs
#: (ConvNeXt, BEiT, Data2Vec: ``layer_scale_init_value``) and timm (``init_values``, also a constructor argument).
INIT_VALUE_SPELLINGS = ("layer_scale_init_value",)


def init_value_spellings(model_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``model_kwargs`` with ``layer_scale_init_value`` renamed to ``init_value``; two spellings that disagree are
    a ``ValueError``."""
    kwargs = dict(model_kwargs)
    for name in INIT_VALUE_SPELLINGS:
        if name not in kwargs:
            continue
        value = kwargs.pop(name)
        for other in ("init_value", "init_values"):
            if kwargs.get(other) is not None and kwargs[other] != value:
                raise ValueError(f"{name}={value!r} and {other}={kwargs[other]!r} disagree; both name the "
                                 f"LayerScale initial value: pass one of them")
        kwargs["init_value"] = value
    return kwargs
