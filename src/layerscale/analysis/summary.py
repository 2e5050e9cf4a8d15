"""The one-line answers of a depth analysis, each stated with the threshold it uses.

* **effective depth**: the number of blocks whose ablation raises the evaluation loss by more than
  ``loss_threshold`` (a fraction of the full model's loss, default 1 %) — the layer-pruning criterion of Gromov et
  al. 2024 (arXiv 2403.17887) and Sun et al. 2025 ("The Curse of Depth in Large Language Models", arXiv 2502.05795),
  counted per block;
* **early-exit saturation depth**: the fewest leading blocks whose early exit (final norm and head applied after
  block ``k``) is within ``loss_threshold`` of the full model's loss;
* **probe-saturation depth**: the first block whose best block-output probe accuracy is within ``probe_tolerance``
  (absolute) of the best accuracy over all blocks (classifiers only);
* **near-identity fraction**: the fraction of blocks whose mean angular distance between input and output stream
  is below ``near_identity`` (default 0.02, i.e. 3.6°).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

__all__ = ["DepthSummary", "summarize"]


@dataclass
class DepthSummary:
    """Effective depth and friends (see the module docstring); block numbers are 1-based."""

    depth: int
    effective_depth: int
    effective_blocks: list[int]
    exit_saturation_depth: int | None
    probe_saturation_depth: int | None
    probe_best_point: str | None
    probe_best_accuracy: float | None
    near_identity_fraction: float
    near_identity_blocks: list[int]
    loss_threshold: float
    near_identity: float
    probe_tolerance: float
    lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DepthSummary:
        return cls(**raw)


def summarize(clean_loss: float, ablation_loss: Sequence[float], early_exit_loss: Sequence[float],
              angular_distance: Sequence[float], block_probe_accuracy: dict[str, Sequence[float]], *,
              loss_threshold: float, near_identity: float, probe_tolerance: float, task: str) -> DepthSummary:
    """Compute the :class:`DepthSummary` from the per-block measures (``early_exit_loss[k]`` keeps ``k`` blocks)."""
    depth = len(ablation_loss)
    margin = loss_threshold * abs(clean_loss)
    effective = [i + 1 for i, loss in enumerate(ablation_loss) if not loss - clean_loss <= margin]
    exit_depth = next((k for k, loss in enumerate(early_exit_loss) if loss - clean_loss <= margin), None)
    near = [i + 1 for i, d in enumerate(angular_distance) if d < near_identity]
    best_point, best_curve = None, None
    for point, curve in block_probe_accuracy.items():
        if curve and (best_curve is None or max(curve) > max(best_curve)):
            best_point, best_curve = point, list(curve)
    probe_depth = best_accuracy = None
    if best_curve is not None:
        best_accuracy = max(best_curve)
        probe_depth = next(i + 1 for i, a in enumerate(best_curve) if a >= best_accuracy - probe_tolerance)
    summary = DepthSummary(depth, len(effective), effective, exit_depth, probe_depth, best_point, best_accuracy,
                           len(near) / depth if depth else math.nan, near, loss_threshold, near_identity,
                           probe_tolerance)
    lens = "logit-lens" if task == "language_model" else "early-exit"
    summary.lines = [
        f"effective depth: {len(effective)} of {depth} blocks raise the loss by more than {loss_threshold:.0%} "
        f"of {clean_loss:.4g} when ablated (blocks {_ranges(effective)})",
        f"{lens} saturation depth: "
        + (f"{exit_depth} of {depth} blocks reach a loss within {loss_threshold:.0%} of the full model's"
           if exit_depth is not None else f"no prefix of the {depth} blocks is within {loss_threshold:.0%} of the "
                                          "full model's loss"),
        (f"probe-saturation depth: block {probe_depth} of {depth} is the first within {probe_tolerance:g} of the "
         f"best linear-probe accuracy {best_accuracy:.4f} (at {best_point})" if probe_depth is not None
         else "probe-saturation depth: no probes (language model or probes off)"),
        f"near-identity blocks: {len(near)} of {depth} ({summary.near_identity_fraction:.0%}) turn the stream by "
        f"less than {near_identity:g} (angular distance, 1 = opposite) (blocks {_ranges(near)})",
    ]
    return summary


def _ranges(blocks: Sequence[int]) -> str:
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
