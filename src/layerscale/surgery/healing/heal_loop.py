"""Healing a model on its calibration split: a short fine-tune, full or LoRA, of any family (timm, Hugging Face,
ours).

Healing after depth pruning follows Gromov et al. 2024 (§3.2: a short fine-tune, QLoRA, on a text corpus) and Men et
al. 2024 (ShortGPT, §4.3: post-training after removal). The loop: AdamW (``lr``, weight decay 0, β = (0.9, 0.999))
on the trainable parameters (every parameter for ``"full"``; the adapters of
:func:`~layerscale.surgery.healing.lora.add_lora` for ``"lora"``, merged afterwards), ``steps`` optimizer steps at a
constant rate over batches of ``batch_size`` calibration examples, which are reshuffled (seeded) each time they are used
up, so exactly ``steps`` steps always run. A batch is a slice of the calibration set already in memory: a
``batch_size`` above its size takes the whole set each step, so memory follows the data (``--samples`` /
``--examples``), not the number asked for; a ``batch_size`` that is no integer >= 1 is refused. The loss is the mean
cross-entropy of :func:`~layerscale.analysis.eval_data.evaluation.per_example_loss` (next-token mean for a language
model). A non-finite loss stops healing with a one-line ``ValueError`` naming the step. The same recipe heals the
unpruned control, so a gain from healing is not mistaken for a gain from pruning. Full healing runs the residual
methods' step hook after each step (:func:`layerscale.residual.after_optimizer_step`: BHyT's correction follows the
weights); LoRA healing does not (the adapters are no part of the weights until merged).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...analysis.eval_data.evaluation import EvalSet, logits_of, per_example_loss
from ...residual.step_hook import after_optimizer_step

__all__ = ["HEAL_METHODS", "HealResult", "heal_model"]

HEAL_METHODS = ("full", "lora")


@dataclass(frozen=True)
class HealResult:
    """``steps`` run, ``method``, ``trainable`` parameters trained, ``first_loss`` / ``last_loss`` (training
    batches)."""

    steps: int
    method: str
    trainable: int
    first_loss: float
    last_loss: float


def _batches(data: EvalSet, batch_size: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(data), generator=generator)
        for start in range(0, len(data), batch_size):
            index = order[start:start + batch_size]
            yield data.inputs[index], data.targets[index]


def heal_model(model: nn.Module, data: EvalSet, steps: int, *, method: str = "full", lr: float = 1e-4,
               batch_size: int = 8, lora_rank: int = 8, seed: int = 0,
               device: str = "cpu") -> tuple[nn.Module, HealResult]:
    """Fine-tune ``model`` (on ``device``) on ``data`` for ``steps`` steps (module docstring). Returns the healed
    model (the same object for ``"full"``; the merged base model for ``"lora"``) and its :class:`HealResult`."""
    if method not in HEAL_METHODS:
        raise ValueError(f"--heal {method!r}: unknown healing method; allowed: {', '.join(HEAL_METHODS)}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"healing steps must be an integer >= 1, got {steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"healing batch size (--heal-batch-size) must be an integer >= 1, got {batch_size!r}")
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"the healing rate must be > 0, got {lr!r}")
    if len(data) == 0:
        raise ValueError("healing needs calibration examples; the calibration split is empty")
    trained = model
    if method == "lora":
        from .lora import add_lora

        trained = add_lora(model, lora_rank)
    else:
        for param in model.parameters():
            param.requires_grad_(True)
    params = [p for p in trained.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    name = type(model).__name__
    was_training = model.training
    trained.train()
    first = last = float("nan")
    ran = 0
    try:
        batches = _batches(data, batch_size, seed)
        for step in range(1, steps + 1):
            inputs, targets = next(batches)
            logits = logits_of(trained(inputs.to(device)), name)
            loss = per_example_loss(logits, targets.to(device))[0].mean()
            if not torch.isfinite(loss):
                raise ValueError(f"healing diverged: the loss is {float(loss.detach())} at step {step}; try a lower "
                                 "--heal-lr")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if method == "full":
                after_optimizer_step(trained, step, steps)
            ran = step
            last = float(loss.detach())
            if step == 1:
                first = last
    finally:
        trained.train(was_training)
    healed = model
    if method == "lora":
        from .lora import merge_lora

        healed = merge_lora(trained)
    healed.train(was_training)
    return healed, HealResult(ran, method, sum(p.numel() for p in params), first, last)
