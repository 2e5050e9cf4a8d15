"""The one-line answers of a depth analysis, each a pure function of mean curves, so that the bootstrap applies it
to every replicate (leading dimensions of the tensors are replicates) and reports an interval.

With ``Δ(n) = E[loss without the chosen span of n blocks] − E[loss]`` (``n = 1 … L``, ``Δ(0) = 0``; the span is
Gromov et al.'s best span, or the best of all spans with ``spans="exhaustive"``) and a tolerance ``δ`` in the
loss's own units (nats):

* **effective depth** ``D_δ = L − max{n ∈ 0 … L : Δ(n) ≤ δ}``: the fewest blocks a model cut by one contiguous span
  keeps while its loss stays within ``δ`` of the full model's (:func:`removal_depth`). It is a depth (the
  ``D_δ`` kept blocks run one after another), it counts joint use (a span's removal is measured, not the sum of
  single ablations), and ``δ`` does not move with the model's loss: two models compare on one scale.
* **early-exit depth** ``K_δ = min{k : loss(first k blocks, then the head) − loss ≤ δ}``, the removal of the
  last ``L − k`` blocks (:func:`exit_depth`; the logit lens for a language model).
* **probe-saturation depth**: the first block whose block-output probe accuracy is within ``probe_tolerance``
  (absolute) of that curve's best (:func:`saturation_depth`; classifiers only).
* **near-identity blocks**: blocks whose angular distance (Gromov et al.'s, on the token the head reads) is below
  ``near_identity`` (:func:`near_identity_count`).
* **blocks needed alone**: blocks whose single ablation raises the loss by more than ``δ`` (the per-block count
  this analysis called "effective depth" before; not a depth: the set need not be contiguous, and it misses joint
  use).
* **effective depth, set variant** ``D^set_δ = L − max{|S| : Δ(S) ≤ δ}`` over sets ``S`` of blocks, contiguous or
  not (:mod:`~layerscale.analysis.pruning.set_depth`): what is left when the removable blocks are spread out (ShortGPT's
  pruning; a model grown by inserting identity blocks).
* **chance flag**: the loss is within 5 % of chance, ``ln C`` or ``ln V`` (:mod:`~layerscale.analysis.chance`).

:meth:`DepthSummary.write_lines` states them in at most three lines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import torch

__all__ = ["DepthSummary", "exit_depth", "near_identity_count", "ranges", "removal_depth", "saturation_depth"]


def removal_depth(removal_delta: torch.Tensor, tolerance: float) -> torch.Tensor:
    """``D_δ`` over the last dimension of ``removal_delta`` (``(..., L)``: ``Δ(1) … Δ(L)``); NaN is never within
    ``δ``. Returns a long tensor of the leading shape."""
    delta = torch.as_tensor(removal_delta, dtype=torch.float64)
    depth = delta.shape[-1]
    within = delta <= tolerance
    n = torch.arange(1, depth + 1)
    removable = torch.where(within, n, torch.zeros_like(n)).amax(dim=-1) if depth else torch.zeros(delta.shape[:-1])
    return (depth - removable).long()


def exit_depth(exit_delta: torch.Tensor, tolerance: float) -> torch.Tensor:
    """``K_δ`` over the last dimension of ``exit_delta`` (``(..., L + 1)``, index ``k`` keeps ``k`` blocks; index
    ``L`` is the full model, 0). Returns a long tensor."""
    delta = torch.as_tensor(exit_delta, dtype=torch.float64)
    within = (delta <= tolerance).clone()
    within[..., -1] = True
    return within.long().argmax(dim=-1)  # the first True


def saturation_depth(accuracy: torch.Tensor, tolerance: float) -> torch.Tensor:
    """The first block (1-based) whose accuracy is within ``tolerance`` of the curve's best, over the last dimension
    of ``accuracy`` ``(..., L)``. Returns a long tensor."""
    acc = torch.as_tensor(accuracy, dtype=torch.float64)
    best = acc.amax(dim=-1, keepdim=True)
    return (acc >= best - tolerance).long().argmax(dim=-1) + 1


def near_identity_count(angular: torch.Tensor, near_identity: float) -> torch.Tensor:
    """How many blocks (last dimension) turn the stream by less than ``near_identity``."""
    return (torch.as_tensor(angular, dtype=torch.float64) < near_identity).sum(dim=-1)


@dataclass
class DepthSummary:
    """The one-line answers (module docstring) with their bootstrap intervals ``[low, high]`` at ``level``;
    block numbers are 1-based. ``effective_depth_shares``: the share of bootstrap replicates giving each depth."""

    depth: int
    tolerance: float
    level: float
    effective_depth: int
    effective_depth_interval: list[float]
    effective_depth_shares: dict[int, float]
    removed_span: list[int] | None
    exit_depth: int
    exit_depth_interval: list[float]
    probe_saturation_depth: int | None
    probe_saturation_interval: list[float] | None
    probe_best_point: str | None
    probe_best_accuracy: float | None
    near_identity_blocks: list[int]
    near_identity_interval: list[float]
    needed_alone_blocks: list[int]
    needed_alone_interval: list[float]
    near_identity: float
    probe_tolerance: float
    span_selection: str
    lines: list[str] = field(default_factory=list)
    set_depth: int | None = None
    set_depth_interval: list[float] | None = None
    set_removed_blocks: list[int] = field(default_factory=list)
    set_search: str | None = None
    set_criterion: str | None = None
    outputs: int | None = None
    chance_warning: str | None = None

    @property
    def near_identity_fraction(self) -> float:
        return len(self.near_identity_blocks) / self.depth if self.depth else float("nan")

    def to_dict(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["effective_depth_shares"] = {str(k): v for k, v in self.effective_depth_shares.items()}
        return raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DepthSummary:
        raw = dict(raw)
        raw["effective_depth_shares"] = {int(k): v for k, v in raw.get("effective_depth_shares", {}).items()}
        return cls(**raw)

    def write_lines(self, clean_loss: float, task: str) -> None:
        """Fill :attr:`lines`: at most three, each answer with its interval (the block lists, the bootstrap shares
        and the thresholds' meaning are in ``analysis.json`` and docs/analysis.md)."""
        level = f"{self.level:.0%}"

        def iv(interval: Sequence[float] | None) -> str:
            return f"{interval[0]:g}–{interval[1]:g}" if interval else "no interval"

        span = f"cut {self.removed_span[0]}-{self.removed_span[1]}" if self.removed_span else "no cut"
        first = (f"effective depth (δ = {self.tolerance:g} nats of loss {clean_loss:.4g}; {level} intervals): "
                 f"D_δ {self.effective_depth} of {self.depth} (one span, {span}; {iv(self.effective_depth_interval)})")
        if self.set_depth is not None:
            how = self.set_search + (f" by {self.set_criterion}" if self.set_search == "greedy" else "")
            first += (f", set variant {self.set_depth} of {self.depth} (any blocks, {how}; "
                      f"{iv(self.set_depth_interval)})")
        lens = "logit-lens" if task == "language_model" else "early-exit"
        second = [f"{lens} depth {self.exit_depth} ({iv(self.exit_depth_interval)})"]
        if self.probe_saturation_depth is not None:
            second.append(f"probe saturation {self.probe_saturation_depth} ({iv(self.probe_saturation_interval)})")
        second += [f"near-identity blocks {len(self.near_identity_blocks)} ({iv(self.near_identity_interval)})",
                   f"needed alone {len(self.needed_alone_blocks)} ({iv(self.needed_alone_interval)})"]
        self.lines = [first, " · ".join(second)]
        if self.chance_warning:
            self.lines.append(self.chance_warning)


def ranges(blocks: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``; ``"none"`` when empty."""
    if not blocks:
        return "none"
    parts, start, prev = [], blocks[0], blocks[0]
    for b in [*blocks[1:], None]:
        if b is not None and b == prev + 1:
            prev = b
            continue
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
        if b is not None:
            start = prev = b
    return ", ".join(parts)
