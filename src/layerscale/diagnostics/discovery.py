"""Find the transformer blocks of any model and, for each residual branch, where to observe it with hooks.

For a block with residual branches ``x ← x + s_i`` (``s_i = γ_i ⊙ F_i(norm_i(x))`` for LayerScale), the monitor
needs, per branch ``i``: the **scaled branch output** ``s_i`` (before stochastic depth), the **stream entering the
branch** ``x``, and the **scale** ``γ_i`` if there is one. Nothing in the model is changed: each of these is read
by a forward hook on an existing sub-module. Recognised block layouts (tried in this order):

* ours (:class:`~layerscale.layers.Block`, :class:`~layerscale.layers.ClassAttentionBlock`): the block fuses the
  update into ``ls{i}.add_to(x, y, mask)`` and never calls ``ls{i}(y)``, so ``s_i`` is the output of
  ``out_norm{i}`` (when present, else of ``attn`` / ``mlp``) multiplied by ``ls{i}.gamma`` — exact for the
  per-channel and scalar forms. A scale module without ``add_to`` is called by the block, so its own output is
  ``s_i``. The per-head form (``attn.head_scale``) acts inside attention: the attention output already is ``s_1``.
* Hugging Face DINOv2-style layers (``layer_scale1.lambda1``): ``s_i`` is the output of ``layer_scale{i}``.
* timm ViT-style blocks (``ls1``/``ls2`` modules, :class:`timm.layers.LayerScale` or ``nn.Identity``): ``s_i`` is
  the output of ``ls{i}``.
* timm CaiT / official DeiT III blocks (``gamma_1``/``gamma_2`` parameters): ``s_i = gamma_i ⊙ attn/mlp output``.
* Hugging Face decoder layers named in :data:`~layerscale.diagnostics.hf_layer_layouts.HF_DECODER_LAYOUTS`, by
  class: those whose branches run in parallel (GPT-J, Phi, Cohere, GPT-NeoX / Pythia, StableLM, CodeGen, Falcon;
  the MLP branch's stream is the block's input), OPT, BLOOM, MPT, BioGPT, XGLM, Apertus, Llama 4, xLSTM, and the
  sandwich-norm layers of GLM-4, Kolibri, AFMoE and LFM3: ``s_i`` is the output of the module the table names; the
  blocks of one branch (Mamba, Mamba-2, Falcon Mamba, Nemotron-H) have one ``BranchProbe``, their ``mixer``.
* Hugging Face decoder layers that normalise each branch's output (Gemma 2 / 3, OLMo 2 / 3, EXAONE 4): ``s_i`` is the
  output of the branch's post-norm.
* Hugging Face GPT-2 and Llama-family decoder layers: ``s_i`` is the attention / MLP output (with LayerScale
  added by :func:`~layerscale.add_layerscale`, its ``layer_scale`` sits in the branch's output layer), times
  Granite's ``residual_multiplier``; the mixture-of-experts ones read the same way (Granite MoE: its
  ``block_sparse_moe``).

The last two match layers by attribute names alone; a layer whose class their reading was not checked against is
still found, flagged ``checked=False`` (:data:`~layerscale.diagnostics.hf_layer_layouts.CHECKED_GENERIC_LAYERS`).

The stream entering branch 1 is the block's input (its ``x_cls`` argument in a class-attention block, whose
update touches only the class token); the stream entering branch 2 is the input of ``norm2`` (or of the MLP when
the method has no input norm; the block's input when the branches run in parallel).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from ..layers.block import _ResidualBranches
from .hf_layer_layouts import (CHECKED_GENERIC_LAYERS, HF_DECODER_LAYOUTS, mlp_stream_path,
                               unsupported_reason)

__all__ = ["BranchProbe", "BlockProbe", "find_blocks", "per_branch_refusal", "BRANCHES"]

BRANCHES = ("attn", "mlp")


@dataclass
class BranchProbe:
    """Where to observe one residual branch.

    ``output_module``'s forward output, multiplied by ``output_gain()`` when that is given, is the scaled branch
    output ``s``. ``stream_module``'s first input is the stream entering the branch; ``None`` means the block's own
    stream argument. ``scale`` is the learnable scale (``None`` when the branch has none) and ``scale_kind`` one of
    ``"channel"``, ``"scalar"``, ``"head"`` or ``None``.
    """

    name: str
    output_module: nn.Module
    output_gain: Callable[[], torch.Tensor] | None
    stream_module: nn.Module | None
    scale: torch.Tensor | None
    scale_kind: str | None


@dataclass
class BlockProbe:
    """One residual block: its qualified name, module, where its stream argument is, and its two branches.

    ``checked``: whether the branches are read by a layout checked against this block's class (always, but for a
    Hugging Face layer that a generic layout matches by attribute names and whose class is not in
    :data:`~layerscale.diagnostics.hf_layer_layouts.CHECKED_GENERIC_LAYERS`): the block itself is found either way;
    the per-branch diagnostics need ``checked``."""

    name: str
    module: nn.Module
    stream_arg: int | str
    branches: tuple[BranchProbe, ...] = field(default_factory=tuple)
    checked: bool = True


def _scale_kind(gamma: torch.Tensor) -> str:
    return "scalar" if gamma.numel() == 1 else "channel"


def _stream_arg(block: nn.Module) -> int | str:
    """``"x_cls"`` when the block's forward takes a class-token stream separately (class attention), else ``0``."""
    try:
        params = inspect.signature(block.forward).parameters
    except (TypeError, ValueError):
        return 0
    return "x_cls" if "x_cls" in params else 0


def _ours(name: str, block: nn.Module) -> BlockProbe | None:
    if not isinstance(block, _ResidualBranches):
        return None
    if getattr(block, "stream_mix1", None) is not None:  # the stream is (..., n, d): no one stream to measure
        raise ValueError(f"{name}: the multi-stream residual {block.residual!r} is not supported by the block "
                         f"diagnostics (monitor, report, depth analysis); use a single-stream method")
    branches = []
    for i, branch in enumerate(BRANCHES, start=1):
        fn = getattr(block, branch)
        out_norm, scale, norm = (getattr(block, f"{slot}{i}") for slot in ("out_norm", "ls", "norm"))
        head = getattr(fn, "head_scale", None) if branch == "attn" else None
        # Branch 1's stream is the block's own argument (in class attention norm1 sees [cls; patches] instead).
        stream_module = None if i == 1 else (norm if norm is not None else fn)
        y_module = out_norm if out_norm is not None else fn
        if scale is not None and hasattr(scale, "add_to"):
            gamma = scale.gamma
            # The factor is read at hook time: under FSDP2 the module then holds the unsharded tensor.
            probe = BranchProbe(branch, y_module, lambda s=scale: s.gamma, stream_module, gamma, _scale_kind(gamma))
        elif scale is not None:
            gamma = getattr(scale, "gamma", None)
            probe = BranchProbe(branch, scale, None, stream_module, gamma,
                                None if gamma is None else _scale_kind(gamma))
        elif head is not None:
            probe = BranchProbe(branch, y_module, None, stream_module, head.gamma, "head")
        else:
            probe = BranchProbe(branch, y_module, None, stream_module, None, None)
        branches.append(probe)
    return BlockProbe(name, block, _stream_arg(block), tuple(branches))


def _scale_modules(name: str, block: nn.Module, scale_prefix: str, attn: str, factor: str) -> BlockProbe | None:
    """A block whose branch ``i`` ends in the scale module ``{scale_prefix}{i}``, its factor the tensor attribute
    ``factor`` (none: an identity in its place); ``s_i`` is that module's output, ``norm2`` reads the MLP's stream."""
    needed = (f"{scale_prefix}1", f"{scale_prefix}2", attn, "mlp", "norm2")
    if not all(isinstance(getattr(block, a, None), nn.Module) for a in needed):
        return None
    branches = []
    for i, branch in enumerate(BRANCHES, start=1):
        ls = getattr(block, f"{scale_prefix}{i}")
        gamma = getattr(ls, factor, None)
        gamma = gamma if isinstance(gamma, torch.Tensor) else None
        stream_module = None if i == 1 else block.norm2
        branches.append(BranchProbe(branch, ls, None, stream_module, gamma,
                                    None if gamma is None else _scale_kind(gamma)))
    return BlockProbe(name, block, _stream_arg(block), tuple(branches))


def _hf_layer_scale(name: str, block: nn.Module) -> BlockProbe | None:
    """Hugging Face DINOv2 layers: ``layer_scale1`` / ``layer_scale2`` with the factor ``lambda1``."""
    return _scale_modules(name, block, "layer_scale", "attention", "lambda1")


def _timm_ls_modules(name: str, block: nn.Module) -> BlockProbe | None:
    """timm ViT-style blocks: ``ls1`` / ``ls2`` with the factor ``gamma``."""
    return _scale_modules(name, block, "ls", "attn", "gamma")


def _gamma_params(name: str, block: nn.Module) -> BlockProbe | None:
    if not all(isinstance(getattr(block, a, None), nn.Module) for a in ("attn", "mlp", "norm2")):
        return None
    gammas = [getattr(block, f"gamma_{i}", None) for i in (1, 2)]
    if not all(isinstance(g, nn.Parameter) for g in gammas):
        return None
    branches = []
    for i, (branch, gamma) in enumerate(zip(BRANCHES, gammas), start=1):
        stream_module = None if i == 1 else block.norm2
        branches.append(BranchProbe(branch, getattr(block, branch), lambda b=block, i=i: getattr(b, f"gamma_{i}"),
                                    stream_module, gamma, _scale_kind(gamma)))
    return BlockProbe(name, block, _stream_arg(block), tuple(branches))


def _hf_post_norm_decoder(name: str, block: nn.Module) -> BlockProbe | None:
    """Hugging Face decoder layers that normalise each branch's output before the residual add: Gemma 2 / 3
    (``input_layernorm → self_attn → post_attention_layernorm``, ``pre_feedforward_layernorm → mlp →
    post_feedforward_layernorm``) and OLMo 2 / 3 and EXAONE 4 (the same without the input norms;
    ``modeling_gemma2.py``, ``modeling_olmo2.py``, ``modeling_olmo3.py``, ``modeling_exaone4.py``, transformers 5.24).
    ``s_i`` is the output of ``post_attention_layernorm`` / ``post_feedforward_layernorm``, and the stream enters the
    MLP branch at ``pre_feedforward_layernorm`` (Gemma) or at the MLP itself (OLMo, EXAONE). Without this layout,
    :func:`_hf_decoder` would take the attention output (before its norm) for ``s_1`` and that norm's input for the
    stream."""
    needed = ("self_attn", "mlp", "post_attention_layernorm", "post_feedforward_layernorm")
    if not all(isinstance(getattr(block, a, None), nn.Module) for a in needed):
        return None
    pre = getattr(block, "pre_feedforward_layernorm", None)
    stream_module = pre if isinstance(pre, nn.Module) else block.mlp
    return BlockProbe(name, block, 0, (BranchProbe("attn", block.post_attention_layernorm, None, None, None, None),
                                       BranchProbe("mlp", block.post_feedforward_layernorm, None, stream_module, None,
                                                   None)), _checked(block))


def per_branch_refusal(probe: BlockProbe, brief: bool = False) -> str | None:
    """The one line the per-branch diagnostics (monitor, report) refuse ``probe`` with, or ``None`` when they read
    it: a block whose branches are read by a layout never checked against its class (``probe.checked`` false), and a
    block with one residual branch (a state-space model's ``x ← x + F(norm(x))``), which their records — an attention
    and an MLP branch per block — do not describe. ``brief``: the reason alone, after the class name (``"MambaBlock's
    blocks have one branch"``), for a run's description."""
    cls = type(probe.module).__name__
    if not probe.checked:
        return f"{cls}'s branch reading is not checked" if brief else (
            f"{probe.name}: the branches of a {cls} are read by attribute names, a reading never checked against "
            f"that class (another layer with these names does not add its branches up to its output: sandwich "
            f"norms, scaled or Post-LN residuals), so per-branch diagnostics could be wrong and are not given; the "
            f"depth analysis, which reads only each block's input and output, still reads it")
    if len(probe.branches) == 1:
        return f"{cls}'s blocks have one branch" if brief else (
            f"{probe.name}: a {cls} has one residual branch (its {probe.branches[0].name}, x <- x + F(norm(x))), "
            f"not an attention and an MLP branch, so the per-branch diagnostics do not describe it; the depth "
            f"analysis, which reads only each block's input and output, reads it")
    return None


def _checked(block: nn.Module) -> bool:
    """Whether a generic layout's reading of ``block`` was checked against its class
    (:data:`~layerscale.diagnostics.hf_layer_layouts.CHECKED_GENERIC_LAYERS`)."""
    return type(block).__name__ in CHECKED_GENERIC_LAYERS


def _hf_listed_decoder(name: str, block: nn.Module) -> BlockProbe | None:
    """The layers of :data:`~layerscale.diagnostics.hf_layer_layouts.HF_DECODER_LAYOUTS` (parallel branches: GPT-J, Phi,
    Cohere, GPT-NeoX, StableLM, CodeGen, Falcon; OPT; BLOOM; MPT; the others the table names): ``s_i`` is the output of
    the layout's attention / MLP module (with γ in its output layer once ``add_layerscale`` put one there, for the
    classes it retrofits; dropouts, identities in evaluation, are not seen), and the MLP branch's stream is the input of
    the layout's stream module — the block's input (``None``) when both branches read it. A configuration that is not a
    residual stack (OPT-350m's Post-LN, ...) is refused in one line naming why."""
    layout = HF_DECODER_LAYOUTS.get(type(block).__name__)
    if layout is None:
        return None
    reason = unsupported_reason(block)
    if reason is not None:
        raise ValueError(f"{name}: {reason}; the block diagnostics (monitor, report, depth analysis) need one")
    stream_path = mlp_stream_path(block, layout)
    mixers = [path for path in layout.attention.split("|") if isinstance(getattr(block, path, None), nn.Module)]
    try:
        attention = block.get_submodule(mixers[0] if mixers else layout.attention)
        if layout.mlp is None:  # one branch: the block's mixer
            return BlockProbe(name, block, 0, (_hf_decoder_branch("mixer", block, attention, None),))
        mlp = block.get_submodule(layout.mlp)
        stream = None if stream_path is None else block.get_submodule(stream_path)
    except AttributeError:
        return None
    return BlockProbe(name, block, 0, (_hf_decoder_branch("attn", block, attention, None),
                                       _hf_decoder_branch("mlp", block, mlp, stream)))


def _hf_decoder(name: str, block: nn.Module) -> BlockProbe | None:
    """Hugging Face GPT-2 (``ln_1, attn, ln_2, mlp``) and Llama-family (``input_layernorm, self_attn,
    post_attention_layernorm, mlp``) decoder layers, and ViT layers (``layernorm_before, attention,
    layernorm_after, mlp``): Pre-LN, no scale; ``s_i`` is the attention / MLP output, times the layer's scalar
    ``residual_multiplier`` where it has one (Granite: ``x + m · F(norm(x))``, ``modeling_granite.py``). Granite
    MoE's MLP branch is its ``block_sparse_moe`` (``modeling_granitemoe.py``); a layer that adds a ``shared_mlp``
    to it (Granite MoE Shared) has no one module whose output is ``s_2``: refused in one line. The linear-attention
    layers of hybrid stacks (Qwen3-Next, Qwen3.5) name their token mixer ``linear_attn``."""
    mlp = getattr(block, "mlp", None)
    if not isinstance(mlp, nn.Module):
        mlp = getattr(block, "block_sparse_moe", None)
        if isinstance(mlp, nn.Module) and isinstance(getattr(block, "shared_mlp", None), nn.Module):
            raise ValueError(f"{name}: {type(block).__name__} adds a shared MLP to its experts, so no one module's "
                             f"output is the MLP branch; the block diagnostics (monitor, report, depth analysis) "
                             f"do not read it")
    if not isinstance(mlp, nn.Module):
        return None
    for attn, norm2 in (("attn", "ln_2"), ("self_attn", "post_attention_layernorm"),
                        ("linear_attn", "post_attention_layernorm"), ("attention", "layernorm_after")):
        if all(isinstance(getattr(block, a, None), nn.Module) for a in (attn, norm2)):
            second_norm = getattr(block, norm2)
            return BlockProbe(name, block, 0, (_hf_decoder_branch("attn", block, getattr(block, attn), None),
                                               _hf_decoder_branch("mlp", block, mlp, second_norm)), _checked(block))
    return None


def _hf_decoder_branch(name: str, block: nn.Module, branch: nn.Module,
                       stream_module: nn.Module | None) -> BranchProbe:
    """A decoder branch; its scale is the ``layer_scale`` that ``add_layerscale`` put in its output layer (the
    branch itself when it is that layer, as OPT's ``fc2``, else the branch's child that holds one: ``c_proj``,
    ``o_proj`` / ``down_proj``, ``dense`` / ``fc2``, ...), so the branch's output already is ``s`` (times the
    block's ``residual_multiplier``, when it has one)."""
    multiplier = getattr(block, "residual_multiplier", None)
    gain = None
    if isinstance(multiplier, (int, float)) and not isinstance(multiplier, bool):
        # a 0-dim float64 factor: multiplied by it, s keeps its dtype (and float64 its precision)
        gain = lambda m=float(multiplier): torch.tensor(m, dtype=torch.float64)  # noqa: E731
    gamma = None
    for child in (branch, *branch.children()):
        found = getattr(child, "layer_scale", None)
        if isinstance(found, torch.Tensor):
            gamma = found
            break
    return BranchProbe(name, branch, gain, stream_module, gamma, None if gamma is None else _scale_kind(gamma))


_LAYOUTS = (_ours, _hf_layer_scale, _timm_ls_modules, _gamma_params, _hf_listed_decoder, _hf_post_norm_decoder,
            _hf_decoder)


def find_blocks(model: nn.Module) -> list[BlockProbe]:
    """Every residual block of ``model`` in forward-registration order (outermost match wins; no nesting).

    Raises ``ValueError`` naming the model's class when no known block layout is found.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch.nn.Module to monitor, got {type(model).__name__}")
    found: list[BlockProbe] = []
    inside: list[str] = []
    for name, module in model.named_modules():
        if any(prefix == "" or name.startswith(prefix + ".") for prefix in inside):
            continue
        for layout in _LAYOUTS:
            probe = layout(name, module)
            if probe is not None:
                found.append(probe)
                inside.append(name)
                break
    if not found:
        raise ValueError(
            f"found no transformer blocks in {type(model).__name__}: expected layerscale Block/ClassAttentionBlock, "
            f"timm blocks (ls1/ls2 or gamma_1/gamma_2 with attn, mlp, norm2) or Hugging Face layers "
            f"(layer_scale1/layer_scale2, GPT-2 ln_2/attn/mlp, Llama post_attention_layernorm/self_attn/mlp, "
            f"Gemma 2 / OLMo 2 post-norms, GPT-J / Phi / Cohere / GPT-NeoX / Falcon parallel layers, OPT, BLOOM, MPT)"
        )
    return found
