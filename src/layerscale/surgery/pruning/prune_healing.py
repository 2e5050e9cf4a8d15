"""What ``layerscale prune --heal-steps K`` does after the removal: heal the pruned model and, alike, the unpruned
control, and report both on the evaluation split (loss and accuracy; for token windows also perplexity with its
95 % interval over windows, :mod:`~layerscale.analysis.measures.perplexity`).

Recipes: ``--heal lora``, or any source that is not a training run read with its own data, is healed by
:func:`~layerscale.surgery.healing.heal_loop.heal_model` on the calibration split (rate ``--heal-lr``, default 1e-4);
``--heal full`` on a training run is healed through ``layerscale train`` with the run's own recipe and data
(:func:`~layerscale.surgery.healing.prune_heal.heal_pruned`). Either way the steps printed and recorded are the steps
that ran, read back from the trainer or the loop, never the number asked for.
"""

from __future__ import annotations

import argparse
from typing import Any

from torch import nn

from ...analysis.eval_data.evaluation import EvalSet
from ...analysis.measures.perplexity import Perplexity, score_windows
from .prune_eval import evaluate

__all__ = ["report_perplexity", "heal_with_control", "uses_run_recipe", "DEFAULT_HEAL_LR"]

DEFAULT_HEAL_LR = 1e-4


def report_perplexity(label: str, model: nn.Module, data: EvalSet, args: argparse.Namespace) -> Perplexity:
    """Print and return the loss and perplexity of ``model`` on the evaluation windows ``data``."""
    found = score_windows(model, data, device=args.device, batch_size=args.batch_size)
    print(f"{label}: {found.line()} over {found.windows} evaluation windows ({found.tokens} predicted tokens)")
    return found


def uses_run_recipe(source: Any, args: argparse.Namespace) -> bool:
    """Whether healing goes through ``layerscale train`` with the source run's recipe (``--heal full`` on a training
    run read with its own data), the one case with a training run for ``--heal-out`` to keep."""
    return source.run is not None and args.heal == "full" and getattr(args, "tokenizer", None) is None


def _heal_one(model: nn.Module, source: Any, calibration: EvalSet, args: argparse.Namespace,
              out: str | None) -> tuple[nn.Module, int]:
    """``(healed model, steps run)``."""
    if uses_run_recipe(source, args):
        from ..healing.prune_heal import heal_pruned

        result = heal_pruned(model.cpu(), source, args.heal_steps, out, lr=args.heal_lr, quiet=True)
        return model.to(args.device), int(result.step)
    from ..healing.heal_loop import heal_model

    healed, result = heal_model(model, calibration, args.heal_steps, method=args.heal,
                                lr=args.heal_lr or DEFAULT_HEAL_LR, batch_size=args.heal_batch_size,
                                lora_rank=args.lora_rank, device=args.device)
    return healed, result.steps


def heal_with_control(pruned: nn.Module, original: nn.Module, source: Any, calibration: EvalSet, evaluation: EvalSet,
                      args: argparse.Namespace, tokens: bool) -> tuple[nn.Module, dict[str, Any]]:
    """Heal ``pruned`` and the unpruned ``original`` alike (module docstring); print before → after for both.
    Returns the healed pruned model and the record for the written ``config.json``."""
    how = "the run's own recipe" if uses_run_recipe(source, args) else (
        "LoRA rank %d, merged" % args.lora_rank if args.heal == "lora" else "full fine-tuning")
    record: dict[str, Any] = {"heal": args.heal, "heal_recipe": how}
    for label, model, out in (("pruned", pruned, args.heal_out), ("control", original, None)):
        before = evaluate(model, evaluation, device=args.device, batch_size=args.batch_size)
        healed, steps = _heal_one(model, source, calibration, args, out)
        after = evaluate(healed, evaluation, device=args.device, batch_size=args.batch_size)
        name = "healed" if label == "pruned" else "control (unpruned, healed alike):"
        print(f"{name} {steps} steps: loss {before.loss:.4f} -> {after.loss:.4f}, accuracy {before.accuracy:.4f} -> "
              f"{after.accuracy:.4f} ({how}{f', run {out}' if out else ''})")
        prefix = "" if label == "pruned" else "control_"
        record.update({f"{prefix}heal_steps": steps, f"{prefix}loss_before_heal": before.loss,
                       f"{prefix}loss_after_heal": after.loss})
        if tokens:
            found = report_perplexity(f"{label} + healed", healed, evaluation, args)
            record[f"{prefix}perplexity_after_heal"] = found.as_dict()
        if label == "pruned":
            pruned = healed
    if args.heal_lr is not None:
        record["heal_lr"] = args.heal_lr
    return pruned, record
