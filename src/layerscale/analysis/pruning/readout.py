"""What the head reads of the residual stream: the vector on which the angular measures are taken.

Gromov et al. 2024 ("The Unreasonable Ineffectiveness of the Deeper Layers", arXiv 2403.17887) measure
``d(x^(l), x^(l+n)) = arccos(cos(x^(l)_T, x^(l+n)_T)) / π`` on the token ``T`` the head reads. Here ``T`` is read
off each stream ``x^(l)`` ``(B, tokens, D)`` **as the model's own head reads its last stream** — the same tokens,
pooled the same way (the final norm and the head's weights are not applied: the measure is on the stream). A
readout is a string of parts joined by ``+`` (concatenated, as a head that reads several parts concatenates them):

* ``cls`` token 0, ``dist`` token 1 (DeiT's distillation token), ``last`` the last token;
* ``mean``, ``max``, ``avgmax`` (``(max + mean) / 2``), each over the tokens, or with ``[P:]`` over the tokens
  ``P`` onward (the ``P`` class and register tokens skipped);
* ``attn_mean`` / ``attn_mean[P:]``: the plain mean of the tokens an **attention pool** reads (CaiT's class
  attention, timm's ``map`` / ``prr`` pools): a *proxy* — the pool's learned, input-dependent weights are not
  applied — and the readout's name says so.

Which readout (:func:`head_readout`): ``model.layerscale_readout`` when the model states one; ``last`` for a
language model (Gromov et al.'s choice); else the model's own pooling, for the models whose pooling code is known
(each recognised by the module and name of the method that pools, so a subclass that overrides it is not):

* timm ``VisionTransformer`` (``timm/models/vision_transformer.py``, ``VisionTransformer.pool`` and
  ``global_pool_nlc``): ``global_pool="token"`` → ``cls``; ``"avg"`` / ``"max"`` / ``"avgmax"`` → ``mean`` /
  ``max`` / ``avgmax`` over ``x[:, num_prefix_tokens:]`` (class and register tokens skipped; every token with
  ``pool_include_prefix``); an ``attn_pool`` (``"map"``, ``"prr"``) → ``attn_mean`` over the same tokens.
  ``no_embed_class`` only moves the position embedding: it does not change what is pooled. timm ``Eva``
  (``eva.py``, ``Eva.pool``): the same, its ``attn_pool`` reading every token. timm ``Beit`` and
  ``VisionTransformerRelPos`` (``forward_head``): ``"avg"`` → ``mean[num_prefix_tokens:]``, else ``cls``. timm
  ``VisionTransformerDistilled`` (``deit.py``, ``forward_head``, eval): ``cls+dist``, its two heads averaged.
* ours (``layerscale.models.timm_api.TimmClassifierAPI._pool``): ViT ``"token"`` → ``cls``, ``"avg"`` →
  ``mean[1:]``.
* CaiT, ours and timm (``cait.py``, ``Cait.forward_head``): the class token joins after the main stack, so the
  main stream holds the patches only: ``"avg"`` → ``mean`` (exact), ``"token"`` → ``attn_mean`` (the class
  attention reads every patch token; proxy).
* Hugging Face ``ViTForImageClassification`` / ``DeiTForImageClassification`` (``sequence_output[:, 0]``) → ``cls``;
  ``DeiTForImageClassificationWithTeacher`` → ``cls+dist``; ``Dinov2ForImageClassification``
  (``modeling_dinov2.py``: ``cat([x[:, 0], x[:, 1:].mean(1)])``) → ``cls+mean[1:]``;
  ``Dinov2WithRegistersForImageClassification`` → ``cls+mean[R+1:]`` (``R = config.num_register_tokens``).

Any other classifier (a wrapper around one of these too) is refused with a one-line ``ValueError`` that says how to
state its readout, ``model.layerscale_readout = "..."``: a wrong guess would silently move Gromov's span.
"""

from __future__ import annotations

import re
from typing import Callable

import torch
from torch import nn

from ..eval_data.evaluation import LANGUAGE_MODEL
from ..removal.streams import BlockStack

__all__ = ["READOUTS", "READOUT_ATTRIBUTE", "has_class_token", "head_readout", "parse_readout", "readout_tokens"]

#: Single tokens a readout part may name, and the poolings (optionally ``[P:]``).
READOUT_TOKENS = ("cls", "dist", "last")
READOUT_POOLS = ("mean", "max", "avgmax", "attn_mean")
#: Every readout part.
READOUTS = READOUT_TOKENS + READOUT_POOLS
#: The model attribute that states a readout (wins over every rule).
READOUT_ATTRIBUTE = "layerscale_readout"
_PART = re.compile(rf"({'|'.join(READOUT_TOKENS)})|({'|'.join(READOUT_POOLS)})(?:\[(\d+):\])?")
_TOKEN_INDEX = {"cls": 0, "dist": 1, "last": -1}


def parse_readout(readout: object) -> list[tuple[str, int]]:
    """``[(part, P), ...]`` of a readout string (``P``: tokens skipped; 0 for a single token); a one-line
    ``ValueError`` naming it otherwise."""
    parts = []
    for text in readout.split("+") if isinstance(readout, str) else [None]:
        match = _PART.fullmatch(text) if text is not None else None
        if match is None:
            raise ValueError(f"readout {readout!r}: expected parts joined by '+', each one of "
                             f"{', '.join(READOUT_TOKENS)} or {', '.join(READOUT_POOLS)}, a pooling optionally "
                             "over the tokens P onward ('mean[1:]')")
        parts.append((match.group(1) or match.group(2), int(match.group(3) or 0)))
    return parts


def readout_tokens(stream: torch.Tensor, readout: str) -> torch.Tensor:
    """``(B, T, D) -> (B, k·D)``, float64: what the head reads (module docstring), ``k`` the number of parts."""
    pieces = []
    for part, skip in parse_readout(readout):
        if part in _TOKEN_INDEX:
            index = _TOKEN_INDEX[part]
            if index >= stream.shape[1]:
                raise ValueError(f"readout {readout!r}: the stream has {stream.shape[1]} token(s), no token {index}")
            pieces.append(stream[:, index].double())
            continue
        if skip >= stream.shape[1]:
            raise ValueError(f"readout {readout!r}: the stream has {stream.shape[1]} token(s), none from {skip} on")
        tokens = stream[:, skip:].double()
        if part in ("mean", "attn_mean"):
            pieces.append(tokens.mean(dim=1))
        elif part == "max":
            pieces.append(tokens.amax(dim=1))
        else:  # timm global_pool_nlc 'avgmax'
            pieces.append(0.5 * (tokens.amax(dim=1) + tokens.mean(dim=1)))
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=-1)


def has_class_token(model: nn.Module, stack: BlockStack) -> bool:
    """Whether the stream's first token is a class token: a ``cls_token`` parameter, and no class-attention stage
    (CaiT adds its class token only after the main stack)."""
    if stack.head_blocks:
        return False
    return any(name.split(".")[-1] == "cls_token" and p is not None for name, p in model.named_parameters())


def _pooled(kind: str, skip: int) -> str:
    return f"{kind}[{skip}:]" if skip else kind


def _method(model: nn.Module, name: str) -> tuple[str | None, str | None]:
    fn = getattr(type(model), name, None)
    return getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)


class _Unreadable(Exception):
    """A known model in a configuration whose head reads no one vector of the stream (``global_pool=""``)."""


def _global_pool(model: nn.Module) -> str:
    pool = getattr(model, "global_pool", None)
    if not pool:
        raise _Unreadable(f"global_pool={pool!r}: its head reads every token separately")
    return pool


def _timm_pool(model: nn.Module, attn_skips_prefix: bool) -> str:
    """timm ``VisionTransformer.pool`` / ``Eva.pool``: ``attn_pool``, else ``global_pool_nlc``."""
    skip = 0 if getattr(model, "pool_include_prefix", False) else int(model.num_prefix_tokens)
    if getattr(model, "attn_pool", None) is not None:
        return _pooled("attn_mean", skip if attn_skips_prefix else 0)
    pool = _global_pool(model)
    if pool == "token":
        return "cls"
    if pool in ("avg", "max", "avgmax"):
        return _pooled("mean" if pool == "avg" else pool, skip)
    raise _Unreadable(f"global_pool={pool!r} is not a pooling timm's VisionTransformer.pool applies")


def _avg_else_token(model: nn.Module) -> str:
    """timm ``Beit`` / ``VisionTransformerRelPos.forward_head``: ``x[:, P:].mean(1) if 'avg' else x[:, 0]``."""
    return _pooled("mean", int(model.num_prefix_tokens)) if _global_pool(model) == "avg" else "cls"


def _class_attention(model: nn.Module) -> str:
    """CaiT: ``x[:, P:].mean(1)`` of ``[cls; patches]`` is every main-stream token; the class token is attention."""
    return "mean" if _global_pool(model) == "avg" else "attn_mean"


def _ours(model: nn.Module, stack: BlockStack) -> str:
    """``TimmClassifierAPI._pool``: ``x[:, 1:].mean(1)`` for ``"avg"``, ``x[:, 0]`` for ``"token"``."""
    if stack.head_blocks:
        return _class_attention(model)
    return "mean[1:]" if _global_pool(model) == "avg" else "cls"


def _hf_dinov2_registers(model: nn.Module) -> str:
    return f"cls+mean[{1 + int(model.config.num_register_tokens)}:]"


_TIMM, _HF, _OURS = "timm.models.", "transformers.models.", "layerscale.models.timm_api"
_Rule = Callable[[nn.Module, BlockStack], str]


def _defines(module: str, cls: str, *methods: str) -> tuple[tuple[str, str, str], ...]:
    return tuple((method, module, f"{cls}.{method}") for method in methods)


#: ``(the methods that pool, each as its class defines it) -> rule``; a subclass overriding one is not recognised.
_RULES: tuple[tuple[tuple[tuple[str, str, str], ...], _Rule], ...] = (
    (_defines(_TIMM + "vision_transformer", "VisionTransformer", "forward_head", "pool"),
     lambda m, s: _timm_pool(m, True)),
    (_defines(_TIMM + "eva", "Eva", "forward_head", "pool"), lambda m, s: _timm_pool(m, False)),
    (_defines(_TIMM + "beit", "Beit", "forward_head"), lambda m, s: _avg_else_token(m)),
    (_defines(_TIMM + "vision_transformer_relpos", "VisionTransformerRelPos", "forward_head"),
     lambda m, s: _avg_else_token(m)),
    (_defines(_TIMM + "deit", "VisionTransformerDistilled", "forward_head"), lambda m, s: "cls+dist"),
    (_defines(_TIMM + "cait", "Cait", "forward_head"), lambda m, s: _class_attention(m)),
    (_defines(_OURS, "TimmClassifierAPI", "forward_head", "_pool"), _ours),
    (_defines(_HF + "vit.modeling_vit", "ViTForImageClassification", "forward"), lambda m, s: "cls"),
    (_defines(_HF + "deit.modeling_deit", "DeiTForImageClassification", "forward"), lambda m, s: "cls"),
    (_defines(_HF + "deit.modeling_deit", "DeiTForImageClassificationWithTeacher", "forward"),
     lambda m, s: "cls+dist"),
    (_defines(_HF + "dinov2.modeling_dinov2", "Dinov2ForImageClassification", "forward"),
     lambda m, s: "cls+mean[1:]"),
    (_defines(_HF + "dinov2_with_registers.modeling_dinov2_with_registers",
              "Dinov2WithRegistersForImageClassification", "forward"), lambda m, s: _hf_dinov2_registers(m)),
)


def _rule(model: nn.Module) -> _Rule | None:
    for methods, rule in _RULES:
        if all(_method(model, method) == (module, qualname) for method, module, qualname in methods):
            return rule
    return None


def head_readout(model: nn.Module, stack: BlockStack, task: str) -> str:
    """The readout of ``model``'s head (module docstring); a one-line ``ValueError`` when it cannot be told."""
    name = type(model).__name__
    stated = getattr(model, READOUT_ATTRIBUTE, None)
    if stated is not None:
        try:
            parse_readout(stated)
        except ValueError as exc:
            raise ValueError(f"{name}.{READOUT_ATTRIBUTE}: {exc}") from None
        return stated
    if task == LANGUAGE_MODEL:
        return "last"
    rule = _rule(model)
    try:
        if rule is not None:
            return rule(model, stack)
        reason = "its pooling is not one this library knows (docs/analysis.md, 'The measures')"
    except _Unreadable as exc:
        reason = str(exc)
    raise ValueError(f"{name}: cannot tell which tokens its head reads ({reason}); state it with "
                     f"model.{READOUT_ATTRIBUTE} = 'cls', 'mean[1:]', 'cls+mean[1:]', ... (parts "
                     f"{', '.join(READOUTS)}) to measure angular distances on it")
