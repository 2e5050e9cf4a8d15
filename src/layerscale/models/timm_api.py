"""The model interface timm's tools expect, shared by our ViT, CaiT and GPT through :class:`TimmModelAPI`.

timm's training script, ``timm.optim.create_optimizer_v2``, ``timm.data.resolve_data_config``, ``ModelEmaV3`` and
feature extraction read a few attributes and methods of a model; this mixin provides them with timm's names,
signatures and semantics (timm ``VisionTransformer`` is the reference):

* ``pretrained_cfg`` / ``default_cfg``: the data configuration (input size from the model's own ``img_size`` and
  ``in_chans``, interpolation, mean / std, ``crop_pct``, ``num_classes``, ``first_conv``, ``classifier``);
* ``no_weight_decay()``: the parameter names that :func:`layerscale.param_groups` keeps out of weight decay;
* ``get_classifier()``, ``reset_classifier(num_classes, global_pool=None)`` (``global_pool``: ``"token"`` the class
  token, ``"avg"`` the mean of the patch tokens, ``""`` no pooling — timm's values), ``num_features``,
  ``num_classes=0`` (the head becomes ``nn.Identity``, so the model returns pooled features);
* ``feature_info`` and ``prune_intermediate_layers(indices, prune_norm, prune_head)``, which timm's
  ``features_only=True`` wrapper (``FeatureGetterNet``) uses;
* ``dynamic_img_size=True``: any image size the patch divides, the position embedding resampled to its grid
  (:func:`~layerscale.models.pos_embed_resample.resample_pos_embed`) as timm's ``VisionTransformer`` does;
* ``forward_intermediates(x, indices, ...)``: the outputs of selected blocks, as timm's
  ``VisionTransformer.forward_intermediates`` returns them (``indices`` as in timm's ``feature_take_indices``:
  ``None`` all blocks, an int ``n`` the last ``n``, a list the given ones, negative counting from the end).

The mixin needs nothing from timm; it only reads the model's attributes.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from .no_decay import is_no_decay_parameter
from .pos_embed_resample import resample_pos_embed

__all__ = ["GLOBAL_POOLS", "TimmClassifierAPI", "TimmModelAPI", "check_global_pool", "classifier_head",
           "feature_take_indices", "resolve_init_value_alias", "IMAGENET_DEFAULT_MEAN", "IMAGENET_DEFAULT_STD"]

#: timm's pooling names our classifiers take: the class token, the mean of the patch tokens, none.
GLOBAL_POOLS = ("token", "avg", "")


def check_global_pool(global_pool: str) -> str:
    """``global_pool`` if it is one of :data:`GLOBAL_POOLS`, else a ``ValueError`` naming it and the allowed ones."""
    if global_pool not in GLOBAL_POOLS:
        raise ValueError(f"global_pool={global_pool!r}: allowed 'token' (the class token), 'avg' (the mean of the "
                         f"patch tokens) or '' (no pooling)")
    return global_pool

#: ImageNet channel statistics (the ones DeiT, DeiT III and CaiT were trained with).
IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)


def classifier_head(in_features: int, num_classes: int) -> nn.Module:
    """``nn.Linear(in_features, num_classes)``, or ``nn.Identity()`` when ``num_classes == 0`` (features only,
    timm's convention). Raises ``ValueError`` for a negative or non-int ``num_classes``."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 0:
        raise ValueError(f"num_classes must be an int >= 0 (0: no classifier, the model returns features), "
                         f"got {num_classes!r}")
    return nn.Linear(in_features, num_classes) if num_classes > 0 else nn.Identity()


def resolve_init_value_alias(init_value: float | None, init_values: float | None) -> float | None:
    """``init_value``, or timm's spelling ``init_values`` when only that one is given; both given and different
    is a ``ValueError`` naming the two values."""
    if init_values is None:
        return init_value
    if init_value is not None and init_value != init_values:
        raise ValueError(f"init_value={init_value!r} and init_values={init_values!r} disagree; init_values is "
                         f"timm's spelling of init_value: pass one of them")
    return init_values


def feature_take_indices(num_blocks: int, indices: int | Sequence[int] | None) -> tuple[list[int], int]:
    """Absolute block indices to take and the largest of them (timm's ``feature_take_indices`` contract).

    ``None``: every block; an int ``n``: the last ``n`` blocks (``1 ≤ n ≤ num_blocks``); a sequence: those indices,
    negative ones counted from the end. An index out of range is a ``ValueError`` naming it.
    """
    if indices is None:
        indices = num_blocks
    if isinstance(indices, bool):
        raise ValueError(f"indices must be None, an int or a list of ints, got {indices!r}")
    if isinstance(indices, int):
        if not 0 < indices <= num_blocks:
            raise ValueError(f"indices={indices}: last-n must be between 1 and {num_blocks} (the number of blocks)")
        take = list(range(num_blocks - indices, num_blocks))
    else:
        take = []
        for index in indices:
            if isinstance(index, bool) or not isinstance(index, int):
                raise ValueError(f"indices must be ints, got {index!r} in {list(indices)!r}")
            absolute = num_blocks + index if index < 0 else index
            if not 0 <= absolute < num_blocks:
                raise ValueError(f"block index {index} is out of range for {num_blocks} blocks "
                                 f"(allowed: {-num_blocks} to {num_blocks - 1})")
            take.append(absolute)
        if not take:
            raise ValueError("indices is an empty list; pass None for every block")
    return take, max(take)


class TimmModelAPI:
    """timm's model interface for any of our models (ViT, CaiT, GPT): data configuration, ``no_weight_decay``,
    ``num_features`` and ``forward_intermediates``.

    A subclass sets :attr:`_cfg_defaults` (the data configuration that is not a model attribute) and
    :attr:`_intermediate_prefix_tokens`, and provides ``_embed_tokens(x)`` (input → the stream entering the first
    block), ``_blocks_for_intermediates()`` and ``_finish_features(x)`` (last block's output → ``forward_features``).
    """

    #: interpolation, crop_pct, mean/std, first_conv, classifier, ... (see timm's ``PretrainedCfg``)
    _cfg_defaults: dict[str, Any] = {}
    #: tokens ahead of the patch tokens in the blocks' outputs (ViT: the class token; CaiT adds it later: 0)
    _intermediate_prefix_tokens: int = 0

    # ---- data configuration -----------------------------------------------------------------------------------

    @property
    def pretrained_cfg(self) -> dict[str, Any]:
        """timm's data configuration of this model (a fresh dict), computed from the model's current attributes;
        entries set through ``model.pretrained_cfg = {...}`` (as timm's builders do) override the others, except
        ``input_size`` and ``num_classes``, which always describe the model as it is."""
        cfg: dict[str, Any] = {"url": "", "hf_hub_id": None, "license": "apache-2.0"}
        cfg.update(self._cfg_defaults)
        patch_embed = getattr(self, "patch_embed", None)
        if patch_embed is not None:
            in_chans, size = patch_embed.in_chans, patch_embed.img_size
            cfg["input_size"] = (in_chans, size, size)
            cfg["fixed_input_size"] = not getattr(self, "dynamic_img_size", False)
            if in_chans != len(IMAGENET_DEFAULT_MEAN):  # ImageNet statistics are for RGB; 0.5 / 0.5 otherwise
                cfg["mean"], cfg["std"] = (0.5,) * in_chans, (0.5,) * in_chans
        if hasattr(self, "num_classes"):
            cfg["num_classes"] = self.num_classes
        cfg.update(self.__dict__.get("_pretrained_cfg_overlay", {}))
        return cfg

    @pretrained_cfg.setter
    def pretrained_cfg(self, value: dict[str, Any] | None) -> None:
        if value is not None and not isinstance(value, dict):
            value = value.to_dict() if hasattr(value, "to_dict") else dict(value)
        overlay = {k: v for k, v in (value or {}).items() if k not in ("input_size", "num_classes")}
        self.__dict__["_pretrained_cfg_overlay"] = overlay

    @property
    def default_cfg(self) -> dict[str, Any]:
        """timm's older name of :attr:`pretrained_cfg`."""
        return self.pretrained_cfg

    @default_cfg.setter
    def default_cfg(self, value: dict[str, Any] | None) -> None:
        self.pretrained_cfg = value

    # ---- optimizer --------------------------------------------------------------------------------------------

    def no_weight_decay(self) -> set[str]:
        """Names of the parameters trained without weight decay: exactly the ``weight_decay = 0`` group of
        :func:`layerscale.param_groups` (LayerScale γ, class token, position embeddings, norm weights and
        biases), frozen parameters included. timm's ``create_optimizer_v2`` reads this."""
        return {name for name, param in self.named_parameters() if is_no_decay_parameter(self, name, param)}

    def group_matcher(self, coarse: bool = False):
        """Layer ids for timm's layer-wise learning-rate decay (``create_optimizer_v2(..., layer_decay=0.75)``):
        ``name → id`` with the embeddings 0, ``blocks.i`` → ``i + 1``, CaiT's class-attention blocks overlapping the
        last self-attention blocks (as timm's ``Cait``), the final norm ``depth``, anything else (the head) last.
        ``coarse`` is accepted for timm compatibility (the grouping is per block either way)."""
        num_blocks = len(self.blocks)
        token_only = len(getattr(self, "blocks_token_only", ()))

        def matcher(name: str) -> float:
            if name.startswith(("cls_token", "pos_embed", "patch_embed.", "wte.", "wpe.")):
                return 0
            if name.startswith("blocks."):
                return int(name.split(".")[1]) + 1
            if name.startswith("blocks_token_only."):
                return int(name.split(".")[1]) + num_blocks - token_only + 1
            if name.startswith("norm."):
                return num_blocks
            return float("inf")

        return matcher

    # ---- features ------------------------------------------------------------------------------------------

    @property
    def num_features(self) -> int:
        """Width of the features the classifier (or the LM head) reads."""
        return self.embed_dim

    # ---- intermediate features --------------------------------------------------------------------------------

    def forward_intermediates(self, x: torch.Tensor, indices: int | Sequence[int] | None = None,
                              return_prefix_tokens: bool = False, norm: bool = False, stop_early: bool = False,
                              output_fmt: str | None = None, intermediates_only: bool = False):
        """Final features and the outputs of selected blocks, with the semantics of timm's
        ``VisionTransformer.forward_intermediates`` (and ``Cait.forward_intermediates``).

        Returns ``(final, intermediates)``, or only ``intermediates`` with ``intermediates_only=True``; ``final``
        is what ``forward_features`` returns. ``indices`` selects blocks (:func:`feature_take_indices`);
        ``norm=True`` passes each intermediate through the final norm; ``output_fmt`` is ``"NCHW"`` (image models'
        default: patch tokens as ``(B, D, H/p, W/p)``) or ``"NLC"`` (``(B, N, D)``; the only format, and the
        default, of token models such as GPT). Prefix tokens (ViT's class token) are split off the
        intermediates and, with ``return_prefix_tokens=True``, returned beside each as ``(tokens, prefix)``.
        ``stop_early=True`` runs no self-attention block after the last one taken (``final`` then comes from
        that block's output). With a multi-stream residual method each intermediate is the stream reduced to one
        token sequence (the method's ``reduce_stream``, or the model's ``stream_reduce``), what the head would read
        at that depth.
        """
        image = getattr(self, "patch_embed", None) is not None
        output_fmt = output_fmt if output_fmt is not None else ("NCHW" if image else "NLC")
        if output_fmt not in (("NCHW", "NLC") if image else ("NLC",)):
            allowed = "'NCHW' or 'NLC'" if image else "'NLC' (a token model has no image grid)"
            raise ValueError(f"output_fmt must be {allowed}, got {output_fmt!r}")
        blocks = self._blocks_for_intermediates()
        take, last = feature_take_indices(len(blocks), indices)
        batch = x.shape[0]
        grid = self.patch_embed.feature_grid(x) if image else None
        method = getattr(self, "residual_method", None)  # multi-stream methods widen the stream between the blocks
        expand = method.expand_stream if method is not None else (lambda t: t)
        reduce = self._reduce_stream
        x = expand(self._embed_tokens(x))
        outputs = []
        for i, block in enumerate(blocks[:last + 1] if stop_early else blocks):
            x = self._run_block(block, x)
            if i in take:
                y = reduce(x)
                outputs.append(self._final_norm(y) if norm else y)
        prefix_tokens = self._intermediate_prefix_tokens
        prefix = [y[:, :prefix_tokens] for y in outputs]
        outputs = [y[:, prefix_tokens:] for y in outputs]
        if output_fmt == "NCHW":
            outputs = [y.reshape(batch, *grid, -1).permute(0, 3, 1, 2).contiguous() for y in outputs]
        if return_prefix_tokens and prefix_tokens:
            outputs = list(zip(outputs, prefix))
        if intermediates_only:
            return outputs
        return self._finish_features(reduce(x)), outputs

    def _blocks_for_intermediates(self) -> nn.Sequential:
        return self.blocks

    def _reduce_stream(self, stream):
        """The tokens the head reads from the residual stream: the model's ``stream_reduce`` where its method built
        one (a reduction with parameters: AttnRes's output aggregation), else the method's ``reduce_stream``."""
        reduce = getattr(self, "stream_reduce", None)
        if reduce is not None:
            return reduce(stream)
        method = getattr(self, "residual_method", None)
        return stream if method is None else method.reduce_stream(stream)

    def _final_norm(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.norm is None else self.norm(x)

    def _finish_features(self, x: torch.Tensor) -> torch.Tensor:
        """The output of ``forward_features`` given the output of the last self-attention block."""
        return self._final_norm(x)


class TimmClassifierAPI(TimmModelAPI):
    """:class:`TimmModelAPI` plus timm's classifier interface, for the image classifiers (ViT, CaiT): they hold
    ``head``, ``head_drop``, ``num_classes`` and ``embed_dim``."""

    # ---- classifier -------------------------------------------------------------------------------------------

    @property
    def head_hidden_size(self) -> int:
        """timm's name for the width entering the final classifier (no pre-logits layer here)."""
        return self.embed_dim

    def get_classifier(self) -> nn.Module:
        """The classification head (``nn.Identity`` when ``num_classes == 0``)."""
        return self.head

    #: what the head reads (timm's names): "token", "avg" or "" (set by the constructor and reset_classifier)
    global_pool: str = "token"

    @property
    def feature_info(self) -> list[dict[str, Any]]:
        """timm's feature description: one entry per self-attention block (``module``, ``num_chs``,
        ``reduction`` = the patch size), as timm's ``VisionTransformer`` / ``Cait`` list them."""
        return [dict(module=f"blocks.{i}", num_chs=self.embed_dim, reduction=self.patch_embed.patch_size)
                for i in range(len(self.blocks))]

    def prune_intermediate_layers(self, indices: int | Sequence[int] = 1, prune_norm: bool = False,
                                  prune_head: bool = True) -> list[int]:
        """Drop what the intermediates ``indices`` do not need, as timm does: the blocks after the last one taken,
        the final norm with ``prune_norm``, and with ``prune_head`` the classifier (``reset_classifier(0, "")``;
        CaiT also its class token and class-attention blocks). Returns the absolute indices kept."""
        take, last = feature_take_indices(len(self.blocks), indices)
        self.blocks = self.blocks[:last + 1]
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            if hasattr(self, "blocks_token_only"):
                self.blocks_token_only = nn.ModuleList()
                self.cls_token = None
            self.reset_classifier(0, "")
        return take

    def _position_embedding(self, grid: tuple[int, int]) -> torch.Tensor:
        """``pos_embed``, resampled to ``grid`` when the model takes any image size (``dynamic_img_size``)."""
        if not getattr(self, "dynamic_img_size", False):
            return self.pos_embed
        prefix = self.pos_embed.shape[1] - self.patch_embed.num_patches
        return resample_pos_embed(self.pos_embed, grid, num_prefix_tokens=prefix)

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        """A new randomly initialised head for ``num_classes`` (0: ``nn.Identity``, features only); with
        ``global_pool`` (``"token"``, ``"avg"``, ``""``: :data:`GLOBAL_POOLS`) the pooling too, as timm's
        ``reset_classifier`` (the final norm stays where it is: on every token, before pooling)."""
        if global_pool is not None:
            check_global_pool(global_pool)
            if global_pool == "token" and getattr(self, "cls_token", None) is None:
                raise ValueError("global_pool='token' needs the class token, which prune_intermediate_layers removed")
            self.global_pool = global_pool
        old = self.head
        ref = next(self.parameters())
        head = classifier_head(self.embed_dim, num_classes).to(device=ref.device, dtype=ref.dtype)
        if isinstance(head, nn.Linear):
            nn.init.trunc_normal_(head.weight, std=0.02)
            nn.init.zeros_(head.bias)
        head.train(old.training)
        self.head = head
        self.num_classes = num_classes

    def _pool(self, x: torch.Tensor) -> torch.Tensor:
        if self.global_pool == "avg":
            return x[:, 1:].mean(dim=1)
        return x[:, 0] if self.global_pool == "token" else x

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """``(B, 1 + N, D)`` normalised tokens → logits ``(B, num_classes)`` from the class token (``"avg"``: the
        mean of the patch tokens; ``""``: every token, ``(B, 1 + N, num_classes)``); with ``pre_logits=True`` the
        pooled features the head would read."""
        x = self.head_drop(self._pool(x))
        return x if pre_logits else self.head(x)
