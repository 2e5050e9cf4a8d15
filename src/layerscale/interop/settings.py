"""Settings that change what a model computes but leave its state-dict keys and shapes unchanged.

Two models can have exactly the same keys and shapes and still compute different functions: a timm
``VisionTransformer`` built with ``global_pool="avg", fc_norm=False`` has our ViT's keys but classifies the mean
patch token instead of the class token; a Hugging Face DINOv2 with ``hidden_act="silu"`` has the keys of one with
GELU. A rename table cannot see these. When the *source model object* (a timm or Hugging Face model, or one of
ours) or its *config* (a ``transformers`` ``Dinov2Config``, or its ``config.json``) is at hand, the settings below
are read from it and from the target model and every difference is refused; when only a state dict is at hand,
:func:`settings_not_in_keys` names the settings that could not be checked (the conversion report lists them).

Settings (one vocabulary for every code base):

==================  =====================================================================================
``pooling``          what the head reads: ``"token"`` (the class token), ``"avg"`` (mean of patch tokens), ...
``fc_norm``          a norm applied after pooling (timm ``fc_norm``)
``class_token``      whether a class token is prepended
``register_tokens``  number of register tokens (Darcet et al. 2024)
``norm_pre``         a norm before the first block (timm ``pre_norm=True``)
``qkv_bias``         whether the query/key/value projection has a bias
``qk_norm``          a norm on queries and keys (timm ``qk_norm=True``)
``activation``       the MLP non-linearity: ``"gelu"`` (exact), ``"gelu_tanh"``, ``"silu"``, ``"relu"``, ...
``norm_eps``         the ε of the blocks' LayerNorms
``num_heads``        attention heads (the packed ``qkv`` weight has the same shape for any head count)
``attention``        ``"self"`` or ``"talking_heads"`` (CaiT)
``mlp``              ``"mlp"`` (two linears) or another MLP type (e.g. ``"swiglu"``)
``block``            the residual arrangement: ``"prenorm"`` (``x + F(norm(x))``) or another residual method
``layer_scale``      the branches carrying a LayerScale ``γ``: ``"both"``, ``"attn"``, ``"mlp"`` or ``"none"``
==================  =====================================================================================
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

__all__ = ["SETTINGS", "model_settings", "config_settings", "compare_settings", "settings_not_in_keys"]

#: Every setting :func:`model_settings` may report, in the order mismatches are listed.
SETTINGS = ("pooling", "fc_norm", "class_token", "register_tokens", "norm_pre", "qkv_bias", "qk_norm", "activation",
            "norm_eps", "num_heads", "attention", "mlp", "block", "layer_scale")

# Settings a state dict of each format cannot reveal (the rest show up as keys or shapes: a bias, a gamma, a
# register token, a fc_norm with parameters, talking-heads projections whose shape is the head count).
_NOT_IN_KEYS = {
    "layerscale": ("pooling", "activation", "norm_eps", "num_heads", "block"),  # Post-LN has Pre-LN's keys
    "timm_vit": ("pooling", "activation", "norm_eps", "num_heads"),
    "deit3_official": ("pooling", "activation", "norm_eps", "num_heads"),
    "timm_cait": ("pooling", "activation", "norm_eps"),
    "hf_dinov2": ("activation", "norm_eps", "num_heads"),
}

# Hugging Face ``hidden_act`` names (transformers.activations.ACT2FN) -> our vocabulary.
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_python": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
                   "gelu_fast": "gelu_fast", "quick_gelu": "quick_gelu", "silu": "silu", "swish": "silu",
                   "relu": "relu", "tanh": "tanh"}


def settings_not_in_keys(format_name: str) -> tuple[str, ...]:
    """The settings a state dict in format ``format_name`` cannot reveal (checked only given a model or config)."""
    return _NOT_IN_KEYS.get(format_name, ("pooling", "activation", "norm_eps", "num_heads"))


def _activation_name(module: nn.Module | None) -> str | None:
    if module is None:
        return None
    if isinstance(module, nn.GELU):
        return "gelu" if module.approximate == "none" else "gelu_tanh"
    known = {nn.SiLU: "silu", nn.ReLU: "relu", nn.Tanh: "tanh"}
    for cls, name in known.items():
        if isinstance(module, cls):
            return name
    cls_name = type(module).__name__
    hf = {"GELUActivation": "gelu", "PytorchGELUTanh": "gelu_tanh", "GELUTanh": "gelu_tanh",
          "NewGELUActivation": "gelu_tanh", "FastGELUActivation": "gelu_fast", "QuickGELUActivation": "quick_gelu",
          "QuickGELU": "quick_gelu", "SiLUActivation": "silu"}
    return hf.get(cls_name, cls_name)


def _is_identity(module: Any) -> bool:
    return module is None or isinstance(module, nn.Identity)


def _scaled_branches(first: bool, second: bool) -> str:
    return {(True, True): "both", (True, False): "attn", (False, True): "mlp", (False, False): "none"}[(first, second)]


def _ours(model: nn.Module) -> dict[str, Any]:
    from ..layers.attention import TalkingHeadAttention
    from ..layers.layer_scale import LayerScale

    blocks = list(getattr(model, "blocks", []))
    if not blocks:
        return {}
    block = blocks[0]
    norm = getattr(block, "norm1", None) or getattr(model, "norm", None)
    residual = getattr(block, "residual", None)
    return {
        "pooling": getattr(model, "global_pool", "token") or "none", "fc_norm": False,
        "class_token": getattr(model, "cls_token", None) is not None, "register_tokens": 0,
        "norm_pre": False,
        "qkv_bias": getattr(block.attn, "qkv", None) is not None and block.attn.qkv.bias is not None,
        "qk_norm": False,
        "activation": _activation_name(getattr(block.mlp, "act", None)),
        "norm_eps": getattr(norm, "eps", None),
        "num_heads": block.attn.num_heads,
        "attention": "talking_heads" if isinstance(block.attn, TalkingHeadAttention) else "self",
        "mlp": "mlp",
        "block": "prenorm" if residual in ("layerscale", "prenorm") else residual,
        "layer_scale": _scaled_branches(isinstance(getattr(block, "ls1", None), LayerScale),
                                        isinstance(getattr(block, "ls2", None), LayerScale)),
    }


def _timm_block_ls(block: nn.Module) -> str:
    if hasattr(block, "gamma_1"):  # timm Cait blocks
        return _scaled_branches(True, True)
    return _scaled_branches(not _is_identity(getattr(block, "ls1", None)),
                            not _is_identity(getattr(block, "ls2", None)))


def _timm(model: nn.Module) -> dict[str, Any]:
    block = model.blocks[0]
    attn, mlp = block.attn, block.mlp
    norm = getattr(block, "norm1", None)
    qkv = getattr(attn, "qkv", None)
    pool = getattr(model, "global_pool", "token")
    if getattr(model, "attn_pool", None) is not None:
        pool = "map"
    block_kind = {"Block": "prenorm", "LayerScaleBlock": "prenorm"}.get(type(block).__name__, type(block).__name__)
    return {
        "pooling": pool or "none",
        "fc_norm": not _is_identity(getattr(model, "fc_norm", None)),
        "class_token": getattr(model, "cls_token", None) is not None,
        "register_tokens": int(getattr(model, "num_reg_tokens", 0) or 0),
        "norm_pre": not _is_identity(getattr(model, "norm_pre", None)),
        "qkv_bias": qkv is not None and qkv.bias is not None,
        "qk_norm": not _is_identity(getattr(attn, "q_norm", None)),
        "activation": _activation_name(getattr(mlp, "act", None)),
        "norm_eps": getattr(norm, "eps", None),
        "num_heads": getattr(attn, "num_heads", None),
        "attention": "talking_heads" if hasattr(attn, "proj_l") else "self",
        "mlp": "mlp" if type(mlp).__name__ == "Mlp" else type(mlp).__name__.lower(),
        "block": block_kind,
        "layer_scale": _timm_block_ls(block),
    }


def config_settings(config: Any) -> dict[str, Any]:
    """The settings stated by a Hugging Face DINOv2 config: a ``transformers`` config object, its ``to_dict()``,
    or the path of its ``config.json``. Raises ``ValueError`` for anything else."""
    if isinstance(config, (str, os.PathLike)):
        from ..untrusted_files import read_json_file

        path = Path(config)
        try:  # read as a hostile file: no link followed, no FIFO opened, the size bounded before reading
            config = read_json_file(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"no such config file: {path}") from None
    if not isinstance(config, Mapping):
        to_dict = getattr(config, "to_dict", None)
        if to_dict is None:
            raise ValueError(f"config must be a transformers config, a mapping or a config.json path, "
                             f"got {type(config).__name__}")
        config = to_dict()
    model_type = config.get("model_type")
    if model_type not in ("dinov2", None):
        raise ValueError(f"config of model_type {model_type!r}: only Hugging Face DINOv2 configs (model_type "
                         f"'dinov2') are understood")
    act = config.get("hidden_act", "gelu")
    out = {
        "pooling": "token", "fc_norm": False, "class_token": True,
        "register_tokens": int(config.get("num_register_tokens", 0) or 0), "norm_pre": False,
        "qkv_bias": bool(config.get("qkv_bias", True)), "qk_norm": False,
        "activation": _HF_ACTIVATIONS.get(act, act) if isinstance(act, str) else repr(act),
        "norm_eps": config.get("layer_norm_eps", 1e-6),
        "num_heads": config.get("num_attention_heads", 12),
        "attention": "self",
        "mlp": "swiglu" if config.get("use_swiglu_ffn", False) else "mlp",
        "block": "prenorm", "layer_scale": "both",
    }
    return out


def model_settings(model: nn.Module) -> dict[str, Any]:
    """The settings of ``model``: one of ours, a timm ``VisionTransformer`` / ``Cait``, or a ``transformers``
    ``Dinov2Model`` (read from its ``config``). Models of other kinds give ``{}`` (nothing to compare)."""
    module = type(model).__module__
    if module.split(".")[0] == "layerscale":
        return _ours(model)
    if module.startswith("timm.") and hasattr(model, "blocks"):
        return _timm(model)
    config = getattr(model, "config", None)
    if module.startswith("transformers.") and getattr(config, "model_type", None) == "dinov2":
        return config_settings(config)
    return {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
        except (TypeError, ValueError):
            return False
    return a == b


def compare_settings(source: Mapping[str, Any], target: Mapping[str, Any], source_name: str = "checkpoint",
                     target_name: str = "model") -> None:
    """Raise one ``ValueError`` naming every setting (of :data:`SETTINGS`) both sides state with different values.

    A setting missing on either side, or stated as ``None``, is not compared."""
    differ = [f"{name} ({source_name} {source[name]!r}, {target_name} {target[name]!r})" for name in SETTINGS
              if source.get(name) is not None and target.get(name) is not None
              and not _same(source[name], target[name])]
    if differ:
        raise ValueError(f"{source_name} and {target_name} compute different functions with these weights: "
                         f"{'; '.join(differ)}; build the {target_name} with the same settings")
