"""The ``gamma`` criterion: how much a LayerScale block's scaled branches move the stream it updates.

For block ``l`` with branches ``i ∈ {attn, mlp}``, each ``x ← x + γ_i ⊙ F_i(norm_i(x))`` (Touvron et al. 2021,
"Going deeper with Image Transformers", arXiv 2103.17239, eq. 1), over the evaluation batches:

    ``score_l = Σ_i ‖γ_i ⊙ F_i(norm_i(x))‖_F / ‖x‖_F``

(Frobenius norms pooled over the batches: :class:`~layerscale.diagnostics.LayerScaleMonitor`'s branch-to-stream
``ratio``). A block whose scaled branches barely move the stream is nearly the identity that removing it makes it,
so a lower score means more removable. This is the library's own criterion, not a published one; it needs
LayerScale on both branches of every block of the main stack.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from ..removal.streams import find_block_stack

__all__ = ["check_gamma_criterion", "gamma_scores"]


def check_gamma_criterion(model: nn.Module) -> None:
    """A one-line ``ValueError`` unless every block of ``model``'s main stack has LayerScale on both branches
    (checked before any computation by the callers that will need :func:`gamma_scores`)."""
    stack = find_block_stack(model)
    for index, probe in enumerate(stack.blocks):
        scaled = sum(branch.scale is not None for branch in probe.branches)
        if scaled < 2:
            raise ValueError(f"the gamma criterion needs LayerScale on both branches of every block; block {index} "
                             f"({probe.name!r}) of {stack.model_name} has {scaled}; use another criterion "
                             "(gromov, block_influence, angular, ablation)")


def gamma_scores(model: nn.Module, batches: Iterable[torch.Tensor]) -> list[float]:
    """``score_l`` (module docstring) for each block of ``model``'s main stack over ``batches`` of inputs.

    Raises a one-line ``ValueError`` when a block lacks LayerScale on a branch, or when no batch is given."""
    from ...diagnostics.monitor import LayerScaleMonitor

    check_gamma_criterion(model)
    stack = find_block_stack(model)
    monitor = LayerScaleMonitor(stack.model, every=1, track_updates=False, warn=False, training_only=False)
    monitor.begin_step(0, force=True)
    try:
        with torch.no_grad():
            seen = 0
            for inputs in batches:
                stack.call(inputs)
                seen += 1
        if not seen:
            raise ValueError("the gamma criterion needs at least one batch of inputs")
    except BaseException:
        monitor.close()
        raise
    record = monitor.end_step()
    entries = {entry["name"]: entry for entry in record["blocks"]}
    return [float(entries[probe.name]["attn"]["ratio"] + entries[probe.name]["mlp"]["ratio"])
            for probe in stack.blocks]
