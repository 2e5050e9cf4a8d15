"""Fold LayerScale into the linear layer that produces each residual branch, for deployment.

A branch whose last operation is a linear layer, scaled by LayerScale (Touvron et al. 2021, CaiT, eq. 1), is
``γ ⊙ (W h + b) = (diag(γ) W) h + γ ⊙ b``: multiplying the rows of ``W`` and ``b`` by ``γ`` and dropping the
scale computes the same function (up to float rounding) with no extra work. A per-head scale acts before the heads
are merged, ``Σ_h γ_h W_h o_h``, so it folds into the input columns of head ``h`` in the output projection.

Dropout after the linear layer and stochastic depth multiply by a mask per element / per sample, and a diagonal
scale commutes with both; so folding is exact in training mode as well (the same random draws give the same
output) and is allowed in either mode. What folding does change is training itself — γ is no longer a separate
parameter with its own learning rate and weight decay — so fold for deployment, not to continue training.
A scale that does not directly follow a linear layer (an output normalisation between them, as in Peri-LN, or an
unknown block) is refused with an error naming the module: it is never folded approximately.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from ...layers.attention import Attention, ClassAttention, TalkingHeadAttention
from ...layers.block import Block, ClassAttentionBlock
from ...layers.layer_scale import HeadScale, LayerScale, LayerScale2d, ScalarScale
from ...layers.mlp import Mlp
from ...models.validation import check_bool
from ..hf.hf_layerscale_config import unmark_layerscale_config
from ..peers import loaded_classes
from ..hf.scaled_conv1d import LayerScaledConv1D
from ..scaled_linear import LayerScaledLinear
from .timm_cait_blocks import FoldedCaitBlock, FoldedCaitClassAttnBlock

__all__ = ["fold_layerscale", "scale_modules"]

_OUR_ATTENTION = (Attention, TalkingHeadAttention, ClassAttention)
_TIMM_LAYERS = "timm.layers"
_TIMM_VIT = "timm.models.vision_transformer"
_TIMM_CAIT = "timm.models.cait"
_HF_DINOV2 = "transformers.models.dinov2.modeling_dinov2"


def _where(path: str) -> str:
    return path or "<root>"


def _peer_scale_types() -> tuple[type, ...]:
    return (loaded_classes(_TIMM_LAYERS, "LayerScale", "LayerScale2d")
            + loaded_classes(_HF_DINOV2, "Dinov2LayerScale"))


def scale_modules(model: nn.Module) -> list[tuple[str, object]]:
    """Every LayerScale-family scale in ``model`` as ``(path, module or parameter)``: ours, timm's
    ``LayerScale``, Hugging Face's ``Dinov2LayerScale``, retrofitted :class:`LayerScaledLinear`, and bare
    ``gamma_1`` / ``gamma_2`` parameters (timm / official CaiT and DeiT III blocks)."""
    types = (LayerScale, ScalarScale, HeadScale, LayerScale2d, LayerScaledLinear,
             LayerScaledConv1D) + _peer_scale_types()
    found: list[tuple[str, object]] = [(name, m) for name, m in model.named_modules() if isinstance(m, types)]
    found += [(name, p) for name, p in model.named_parameters() if name.rpartition(".")[2] in ("gamma_1", "gamma_2")]
    return found


@dataclass
class _Plan:
    claimed: list[object]
    apply: Callable[[], None]


class _Folder:
    """Plans every fold first (raising on anything that cannot be folded exactly), then applies them all."""

    def __init__(self, root: nn.Module) -> None:
        self.root = root
        uses = Counter(id(p) for _, p in root.named_parameters(remove_duplicate=False))
        self.shared = {pid for pid, n in uses.items() if n > 1}
        self.plans: list[_Plan] = []

    # ---- checks ---------------------------------------------------------------------------------------------
    def output_linear(self, module: object, path: str, scale_path: str, gamma: torch.Tensor) -> nn.Linear:
        if not isinstance(module, nn.Linear):
            raise ValueError(f"cannot fold {scale_path}: the branch output {_where(path)} is a "
                             f"{type(module).__name__}, not an nn.Linear")
        if any(p is not None and id(p) in self.shared for p in (module.weight, module.bias)):
            raise ValueError(f"cannot fold {scale_path} into {path}: its weight is shared with another module "
                             f"(tied weights would change elsewhere)")
        if gamma.numel() not in (1, module.out_features):
            raise ValueError(f"cannot fold {scale_path} of shape {tuple(gamma.shape)} into {path} with "
                             f"{module.out_features} output features")
        return module

    def replace(self, path: str, new: nn.Module) -> None:
        parent_path, _, attr = path.rpartition(".")
        if not attr:
            raise ValueError(f"cannot fold a {type(new).__name__}'s scale when it is the model itself; wrap it")
        setattr(self.root.get_submodule(parent_path) if parent_path else self.root, attr, new)

    # ---- recognised structures ------------------------------------------------------------------------------
    def our_block(self, path: str, block: Block | ClassAttentionBlock) -> None:
        for i, branch in ((1, "attn"), (2, "mlp")):
            scale = getattr(block, f"ls{i}")
            if scale is None:
                continue
            where = f"{path}.ls{i}"
            if not isinstance(scale, (LayerScale, ScalarScale)):
                raise ValueError(f"cannot fold {where}: a {type(scale).__name__} is not a LayerScale or "
                                 f"ScalarScale, so it is not a diagonal scale a linear layer can absorb")
            out_norm = getattr(block, f"out_norm{i}")
            if out_norm is not None:
                raise ValueError(f"cannot fold {where}: {path}.out_norm{i} ({type(out_norm).__name__}) sits "
                                 f"between the branch's linear layer and the scale, so folding would be inexact")
            owner = getattr(block, branch)
            known = isinstance(owner, _OUR_ATTENTION) if branch == "attn" else isinstance(owner, Mlp)
            if not known:
                raise ValueError(f"cannot fold {where}: {path}.{branch} is a {type(owner).__name__}, whose "
                                 f"output layer is unknown")
            lin_path = f"{path}.{branch}." + ("proj" if branch == "attn" else "fc2")
            linear = self.output_linear(getattr(owner, "proj" if branch == "attn" else "fc2"), lin_path, where,
                                        scale.gamma)
            self.plans.append(_Plan([scale], _rows_then(linear, scale.gamma, lambda b=block, n=f"ls{i}":
                                                        setattr(b, n, None))))
        head_scale = getattr(block.attn, "head_scale", None)
        if head_scale is not None:
            where = f"{path}.attn.head_scale"
            proj = self.output_linear(block.attn.proj, f"{path}.attn.proj", where, torch.ones(1))
            if proj.in_features % head_scale.gamma.numel():
                raise ValueError(f"cannot fold {where}: {head_scale.gamma.numel()} heads do not divide "
                                 f"{proj.in_features} input features of {path}.attn.proj")

            def fold_heads(attn=block.attn, proj=proj, gamma=head_scale.gamma):
                heads = gamma.numel()
                proj.weight.view(proj.out_features, heads, -1).mul_(gamma.detach().view(1, heads, 1))
                attn.head_scale = None

            self.plans.append(_Plan([head_scale], fold_heads))

    def timm_vit_block(self, path: str, block: nn.Module) -> None:
        scale_types = (LayerScale,) + loaded_classes(_TIMM_LAYERS, "LayerScale")
        attn_ok = isinstance(block.attn, loaded_classes(_TIMM_LAYERS, "Attention"))
        mlp_ok = isinstance(block.mlp, loaded_classes(_TIMM_LAYERS, "Mlp", "GluMlp", "SwiGLU"))
        for i, branch, ok, lin in ((1, "attn", attn_ok, "proj"), (2, "mlp", mlp_ok, "fc2")):
            scale = getattr(block, f"ls{i}")
            if isinstance(scale, nn.Identity):
                continue
            where = f"{path}.ls{i}"
            if not isinstance(scale, scale_types):
                raise ValueError(f"cannot fold {where}: a {type(scale).__name__} is not a per-channel LayerScale")
            if not ok:
                raise ValueError(f"cannot fold {where}: {path}.{branch} is a {type(getattr(block, branch)).__name__},"
                                 f" whose output layer is unknown")
            linear = self.output_linear(getattr(getattr(block, branch), lin), f"{path}.{branch}.{lin}", where,
                                        scale.gamma)
            self.plans.append(_Plan([scale], _rows_then(linear, scale.gamma, lambda b=block, n=f"ls{i}":
                                                        setattr(b, n, nn.Identity()))))

    def timm_cait_block(self, path: str, block: nn.Module, class_attention: bool) -> None:
        mlp_ok = isinstance(block.mlp, loaded_classes(_TIMM_LAYERS, "Mlp"))
        attn_types = loaded_classes(_TIMM_CAIT, "ClassAttn" if class_attention else "TalkingHeadAttn")
        if not (mlp_ok and isinstance(block.attn, attn_types)):
            raise ValueError(f"cannot fold {path}.gamma_1/gamma_2: the block's attention "
                             f"({type(block.attn).__name__}) or MLP ({type(block.mlp).__name__}) was replaced")
        proj = self.output_linear(block.attn.proj, f"{path}.attn.proj", f"{path}.gamma_1", block.gamma_1)
        fc2 = self.output_linear(block.mlp.fc2, f"{path}.mlp.fc2", f"{path}.gamma_2", block.gamma_2)
        folded_type = FoldedCaitClassAttnBlock if class_attention else FoldedCaitBlock

        def apply():
            _scale_rows(proj, block.gamma_1)
            _scale_rows(fc2, block.gamma_2)
            self.replace(path, folded_type(block))

        self.plans.append(_Plan([block.gamma_1, block.gamma_2], apply))

    def hf_dinov2_layer(self, path: str, layer: nn.Module) -> None:
        scale_types = loaded_classes(_HF_DINOV2, "Dinov2LayerScale")
        # The layer that produces each branch: transformers >= 5.18 names first, then the older names
        # (attention.output.dense; SwiGLU's weights_out), each followed only by dropout before the scale.
        candidates = {1: ("attention.o_proj", "attention.output.dense"),
                      2: ("mlp.fc2", "mlp.down_proj", "mlp.weights_out")}
        for i in (1, 2):
            scale = getattr(layer, f"layer_scale{i}")
            if isinstance(scale, nn.Identity):
                continue
            where = f"{path}.layer_scale{i}"
            if not isinstance(scale, scale_types):
                raise ValueError(f"cannot fold {where}: a {type(scale).__name__} is not Dinov2LayerScale")
            name = next((n for n in candidates[i] if _has_submodule(layer, n)), candidates[i][0])
            module = layer.get_submodule(name) if _has_submodule(layer, name) else None
            linear = self.output_linear(module, f"{path}.{name}", where, scale.lambda1)
            self.plans.append(_Plan([scale], _rows_then(linear, scale.lambda1, lambda l=layer, n=f"layer_scale{i}":
                                                        setattr(l, n, nn.Identity()))))

    def scaled_linear(self, path: str, module: LayerScaledLinear) -> None:
        self.output_linear(module, _where(path), f"{_where(path)}.layer_scale", module.layer_scale)
        self.plans.append(_Plan([module], lambda: self.replace(path, module.folded())))

    def scaled_conv1d(self, path: str, module: LayerScaledConv1D) -> None:
        if any(id(p) in self.shared for p in (module.weight, module.bias)):
            raise ValueError(f"cannot fold {_where(path)}.layer_scale: its weight is shared with another module")
        self.plans.append(_Plan([module], lambda: self.replace(path, module.folded())))

    def plan(self) -> None:
        vit_blocks = loaded_classes(_TIMM_VIT, "Block")
        cait_blocks = loaded_classes(_TIMM_CAIT, "LayerScaleBlock")
        cait_ca_blocks = loaded_classes(_TIMM_CAIT, "LayerScaleBlockClassAttn")
        dinov2_layers = loaded_classes(_HF_DINOV2, "Dinov2Layer")
        for path, module in self.root.named_modules():
            kind = type(module)
            if isinstance(module, (Block, ClassAttentionBlock)):
                self.our_block(path, module)
            elif kind in vit_blocks:
                self.timm_vit_block(path, module)
            elif kind in cait_blocks or kind in cait_ca_blocks:
                self.timm_cait_block(path, module, class_attention=kind in cait_ca_blocks)
            elif kind in dinov2_layers:
                self.hf_dinov2_layer(path, module)
            elif isinstance(module, LayerScaledLinear):
                self.scaled_linear(path, module)
            elif isinstance(module, LayerScaledConv1D):
                self.scaled_conv1d(path, module)


def _has_submodule(module: nn.Module, name: str) -> bool:
    try:
        module.get_submodule(name)
    except AttributeError:
        return False
    return True


def _scale_rows(linear: nn.Linear, gamma: torch.Tensor) -> None:
    """``W ← diag(γ) W``, ``b ← γ ⊙ b`` (γ per output feature, or one scalar)."""
    g = gamma.detach().to(linear.weight.dtype).reshape(-1)
    linear.weight.mul_(g.unsqueeze(1))
    if linear.bias is not None:
        linear.bias.mul_(g)


def _rows_then(linear: nn.Linear, gamma: torch.Tensor, remove: Callable[[], None]) -> Callable[[], None]:
    def apply() -> None:
        _scale_rows(linear, gamma)
        remove()

    return apply


def fold_layerscale(model: nn.Module, inplace: bool = True) -> nn.Module:
    """Multiply every LayerScale into the linear layer that produces its branch and remove the scale.

    Handles our blocks (``ls1`` → ``attn.proj``, ``ls2`` → ``mlp.fc2``, ``attn.head_scale`` → the matching input
    columns of ``attn.proj``; the slots become ``None``), timm ``VisionTransformer`` blocks (``ls1``/``ls2`` become
    ``nn.Identity``), timm ``Cait`` blocks (``gamma_1``/``gamma_2`` folded and the block replaced by
    :class:`~layerscale.surgery.folding.timm_cait_blocks.FoldedCaitBlock`, so no multiply is left), Hugging Face
    ``Dinov2Layer`` (``layer_scale{1,2}`` become ``nn.Identity``) and :class:`LayerScaledLinear` from
    :func:`add_layerscale` (becomes a plain ``nn.Linear``). Eval outputs agree with the unfolded model to float
    rounding. ``inplace=False`` folds a deep copy and leaves ``model`` untouched (``inplace`` is True or False;
    anything else, such as the truthy string ``"no"``, is a ``ValueError`` before anything changes). The folded state dict has the keys
    of the same architecture built without scales (our models: ``residual="prenorm"``, except that per-head scales
    leave ``attn.proj`` without a bias; timm ViT or DeiT III: ``init_values=0``), so it loads into either; see also
    :func:`~layerscale.surgery.fold_state_dict`, which folds a state dict without building the model.

    Raises ``ValueError`` naming the module, before changing anything, if a scale cannot be folded exactly (an
    output norm between the linear and the scale, an unrecognised block, a tied weight), or if ``model`` has no
    LayerScale at all.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"fold_layerscale expects an nn.Module, got {type(model).__name__}")
    target = model if check_bool("inplace", inplace) else copy.deepcopy(model)
    folder = _Folder(target)
    folder.plan()
    claimed = {id(obj) for plan in folder.plans for obj in plan.claimed}
    unclaimed = [(path, obj) for path, obj in scale_modules(target) if id(obj) not in claimed]
    if unclaimed:
        path, obj = unclaimed[0]
        kind = type(obj).__name__ if isinstance(obj, nn.Module) else "parameter"
        raise ValueError(f"cannot fold {_where(path)} ({kind}) in {type(model).__name__}: it is not in a block whose "
                         f"output linear layer is known" + (f" (+{len(unclaimed) - 1} more)" if len(unclaimed) > 1
                                                            else ""))
    if not folder.plans:
        raise ValueError(f"{type(model).__name__} has no LayerScale to fold")
    with torch.no_grad():
        for plan in folder.plans:
            plan.apply()
    unmark_layerscale_config(target)  # a Hugging Face model without γ: its own config type again
    return target
