"""Which blocks can go? One score per block (lower = more removable) and the best contiguous span to remove.

For the stream ``x^(l)`` entering block ``l`` (0-based, ``x^(L)`` leaves the last block), on an evaluation set:

* **angular** (Gromov et al. 2024, "The Unreasonable Ineffectiveness of the Deeper Layers", arXiv 2403.17887):
  ``d(x^(l), x^(l+n)) = arccos(cos(x^(l)_T, x^(l+n)_T)) / π`` on the token ``T`` the head reads, averaged
  over the examples. The per-block score is ``n = 1``. ``x_T`` is read off each stream as the model's own head
  reads its last stream — the same tokens, pooled the same way (:mod:`~layerscale.analysis.pruning.readout`, which
  gives the rule and its sources): the **last** token for a language model (Gromov et al.'s choice), the **class**
  token for a head that reads it, the mean (or max) over the tokens the head pools for a model that pools — timm
  ``global_pool="avg"`` skips the class and register tokens (``mean[num_prefix_tokens:]``) — and, for an attention
  pool (CaiT's class attention, timm ``map``), the plain mean of the tokens it reads, named ``attn_mean`` (a proxy).
  A classifier whose pooling is not known is refused unless ``model.layerscale_readout`` states it.
* **block_influence** (Men et al. 2024, "ShortGPT: Layers in Large Language Models are More Redundant Than You
  Expect", arXiv 2403.03853): ``BI_l = 1 − E_{X,t}[cos(x^(l)_t, x^(l+1)_t)]`` over every token ``t`` of every
  example (the mean over a sequence's tokens first, then over the examples).
* **ablation**: ``Δloss_l = E_X[loss with block l replaced by the identity] − E_X[loss]``, the cached-suffix
  ablation of :mod:`layerscale.analysis.removal.ablation`.

**Best span** (Gromov et al. 2024): the ``n`` contiguous blocks ``ℓ* … ℓ* + n − 1`` to remove are those
with ``ℓ*(n) = argmin_ℓ d(x^(ℓ), x^(ℓ+n))`` (first on ties), ``ℓ = 0 … L − n``.

``batches`` everywhere here is the evaluation data in any form
:func:`layerscale.analysis.eval_data.evaluation.as_eval_set` accepts (``(inputs, targets)`` tensors, token ids
``(N, T)``, a Dataset of ``(input, target)`` examples, a DataLoader), as for :func:`layerscale.analysis.analyze_depth`;
``max_examples`` of it are used, ``batch_size`` at a time. The inputs go to ``device`` (checked first: a one-line
``ValueError`` for a GPU this machine does not have); the model must already be there. The model is put in eval mode
and restored afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..device import analysis_device
from ..eval_data.evaluation import as_eval_set, logits_of, per_example_loss, task_of
from ..measures.geometry import angular_distance
from ..removal.ablation import LossTotals, ablate_each_block
from ..removal.span_removal import best_span
from ..removal.streams import BlockStack, find_block_stack
from .readout import READOUTS, has_class_token, head_readout, readout_tokens

__all__ = ["RANKINGS", "READOUTS", "StreamMeasures", "best_span", "block_influence", "gromov_best_span",
           "has_class_token", "head_readout", "measure_streams", "rank_blocks", "readout_tokens", "stream_distances"]

#: The criteria of :func:`rank_blocks`.
RANKINGS = ("angular", "block_influence", "ablation")


def batch_readout(model: nn.Module, stack: BlockStack, logits: torch.Tensor, targets: torch.Tensor,
                  seen: tuple[str | None, str | None], needed: bool = True) -> tuple[str, str | None]:
    """``(task, readout)`` of one evaluation batch, given those of the batches before (``(None, None)`` first):
    every batch must be of the same task; the readout (what the head reads, :func:`head_readout`) is fixed by
    the first (``None`` when not ``needed``)."""
    name = stack.model_name
    task, readout = seen
    batch_task = task_of(logits, targets, name)
    if task is not None and batch_task != task:
        raise ValueError(f"{name}: evaluation batches of different tasks")
    return batch_task, readout or (head_readout(model, stack, batch_task) if needed else None)


def stream_distances(head: torch.Tensor) -> torch.Tensor:
    """``(B, L + 1, D) -> (B, L + 1, L + 1)``: the angular distance ``d(x^(i), x^(j))`` (in ``[0, 1]``) between
    every two depths of each example's head token (symmetric, zero diagonal)."""
    if head.dim() != 3:
        raise ValueError(f"stream_distances needs (examples, depths, width), got {tuple(head.shape)}")
    b, depths, _ = head.shape
    out = torch.zeros(b, depths, depths, dtype=torch.float64, device=head.device)
    for n in range(1, depths):
        d = angular_distance(head[:, :depths - n], head[:, n:])
        index = torch.arange(depths - n, device=head.device)
        out[:, index, index + n] = d
        out[:, index + n, index] = d
    return out


def block_influence(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """ShortGPT's ``1 − cos(x_t, y_t)`` averaged over each example's tokens: ``(B, T, D) × 2 -> (B,)``, float64."""
    if before.shape != after.shape:
        raise ValueError(f"block_influence needs tensors of one shape, got {tuple(before.shape)} and "
                         f"{tuple(after.shape)}")
    cos = F.cosine_similarity(before.double(), after.double(), dim=-1, eps=1e-12)
    return (1.0 - cos).reshape(before.shape[0], -1).mean(dim=1)


@dataclass
class StreamMeasures:
    """Per-example measures of one pass over the evaluation set (``N`` examples, ``L`` blocks).

    ``head_distance[e, i, j]``: angular distance between depths ``i`` and ``j`` of example ``e``'s head token;
    ``block_influence[e, l]``: ShortGPT's ``1 − mean_t cos`` of block ``l``; ``clean_loss[e]``; with ablation,
    ``ablation_loss[e, l]``: the loss with block ``l`` replaced by the identity.
    """

    task: str
    readout: str | None
    head_distance: torch.Tensor | None
    block_influence: torch.Tensor
    clean_loss: torch.Tensor
    ablation_loss: torch.Tensor | None = None

    @property
    def depth(self) -> int:
        return self.block_influence.shape[1]


def _check_positive(name: str, value: Any, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int{' or None' if allow_none else ''}, got {value!r}")


def measure_streams(model: nn.Module, batches: Any, *, ablation: bool = False, device: str | torch.device = "cpu",
                    batch_size: int = 250, max_examples: int | None = 1000,
                    call: Callable[[torch.Tensor], Any] | None = None, angular: bool = True) -> StreamMeasures:
    """One pass over ``batches`` (see the module docstring) recording the :class:`StreamMeasures`; with
    ``ablation`` also every block's ablation (about ``L²/2`` block evaluations per batch). Without ``angular`` the
    head-token distances are not measured (``readout`` and ``head_distance`` are ``None``), so a model whose head's
    readout is not known (:func:`head_readout` refuses it) can still be measured by the other criteria."""
    device = analysis_device(device)
    _check_positive("batch_size", batch_size)
    _check_positive("max_examples", max_examples, allow_none=True)
    stack = find_block_stack(model, call)
    model, name = stack.model, stack.model_name
    evalset = as_eval_set(batches, max_examples)
    task = readout = None
    distances, influence, clean = [], [], []
    totals = LossTotals(stack.depth)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for inputs, targets in evalset.batches(batch_size):
                inputs, targets = inputs.to(device), targets.to(device)
                captured = stack.capture_evaluation(inputs)
                logits = logits_of(captured.output, name)
                task, readout = batch_readout(model, stack, logits, targets, (task, readout), angular)
                streams = captured.streams
                if angular:
                    head = torch.stack([readout_tokens(s, readout) for s in streams], dim=1)
                    distances.append(stream_distances(head).cpu())
                influence.append(torch.stack([block_influence(streams[i], streams[i + 1])
                                              for i in range(stack.depth)], dim=1).cpu())
                clean.append(per_example_loss(logits, targets)[0].cpu())
                if ablation:
                    ablate_each_block(stack, inputs, targets, captured, totals)
                del captured, streams
    finally:
        model.train(was_training)
    return StreamMeasures(task, readout, torch.cat(distances) if angular else None, torch.cat(influence),
                          torch.cat(clean),
                          totals.per_example()[0] if ablation else None)


def rank_blocks(model: nn.Module, batches: Any, by: str, *, device: str | torch.device = "cpu",
                batch_size: int = 250, max_examples: int | None = 1000,
                call: Callable[[torch.Tensor], Any] | None = None) -> list[float]:
    """One score per block of ``model``'s main stack (length ``L``, block order), lower = more removable:
    ``by="angular"`` the mean ``d(x^(l), x^(l+1))`` on the token the head reads, ``"block_influence"`` ShortGPT's
    ``BI_l``, ``"ablation"`` the mean loss increase when block ``l`` is the identity (module docstring).

    ``batches``: the evaluation data, any form :func:`~layerscale.analysis.eval_data.evaluation.as_eval_set` accepts.
    Raises a one-line ``ValueError`` for an unknown ``by``, a model without discoverable blocks, data that does not
    fit it, a device this machine does not have, or non-finite scores (NaN weights or streams).
    """
    if by not in RANKINGS:
        raise ValueError(f"by must be one of {RANKINGS}, got {by!r}")
    measures = measure_streams(model, batches, ablation=by == "ablation", device=device, batch_size=batch_size,
                               max_examples=max_examples, call=call, angular=by == "angular")
    if by == "angular":
        index = torch.arange(measures.depth)
        scores = measures.head_distance[:, index, index + 1].mean(dim=0)
    elif by == "block_influence":
        scores = measures.block_influence.mean(dim=0)
    else:
        scores = measures.ablation_loss.mean(dim=0) - measures.clean_loss.mean()
    if not torch.isfinite(scores).all():
        raise ValueError(f"{type(model).__name__}: the {by} scores are not finite (NaN or infinite weights or "
                         "streams)")
    return scores.tolist()


def gromov_best_span(model: nn.Module, batches: Any, n: int, *, device: str | torch.device = "cpu",
                     batch_size: int = 250, max_examples: int | None = 1000,
                     call: Callable[[torch.Tensor], Any] | None = None) -> tuple[int, float]:
    """``(start, distance)``: the ``n`` contiguous blocks ``start … start + n − 1`` (0-based) whose removal Gromov
    et al. 2024 choose — the smallest mean angular distance between the head token entering block ``start`` and
    leaving block ``start + n − 1`` — and that distance (see
    :func:`~layerscale.analysis.removal.span_removal.best_span`; arguments as for :func:`rank_blocks`)."""
    measures = measure_streams(model, batches, device=device, batch_size=batch_size, max_examples=max_examples,
                               call=call)
    return best_span(measures.head_distance.mean(dim=0), n)
