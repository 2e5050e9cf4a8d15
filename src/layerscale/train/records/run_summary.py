"""What ``layerscale train`` says when a run ends, and the checks it prints as warnings before the run starts.

The final line names the wall time of the command; the final evaluation's numbers, each named with the split it
read (``validation`` or ``test``), with the best accuracy over the evaluations of that split (from
``metrics.jsonl``); with a validation split, the test evaluation's numbers too; the parameter count (from the last
checkpoint's safetensors header, no tensor is read) and the ``layerscale report`` command to run next.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

from .metrics_log import METRICS_FILE, read_metrics

__all__ = ["early_stop_on_test_warning", "final_line", "format_duration", "parameter_count", "warmup_warning",
           "workers_resume_warning"]


def format_duration(seconds: float) -> str:
    """``"42.1 s"``, ``"3 min 05 s"`` or ``"2 h 03 min"``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def parameter_count(checkpoint: Path | None) -> int | None:
    """Elements of every tensor in ``checkpoint/model.safetensors``, read from the header; ``None`` without one."""
    if checkpoint is None or not (Path(checkpoint) / "model.safetensors").is_file():
        return None
    from safetensors import safe_open

    total = 0
    with safe_open(str(Path(checkpoint) / "model.safetensors"), framework="pt") as handle:
        for key in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
            total += math.prod(handle.get_slice(key).get_shape())
    return total


def _best_accuracy(run_dir: Path, final: dict[str, Any]) -> tuple[float, int] | None:
    evals = [r for r in read_metrics(run_dir / METRICS_FILE)
             if r.get("split") == "eval" and isinstance(r.get("accuracy"), (int, float))
             and r.get("on") == final.get("on")]
    if not evals:
        return None
    best = max(evals, key=lambda r: (r["accuracy"], -r["step"]))
    return float(best["accuracy"]), int(best["step"])


def final_line(result: Any, wall_seconds: float) -> str:
    """One line: ``done in T: step N, final validation accuracy A (best B at step S), validation loss L, test
    accuracy TA, test loss TL, P parameters; checkpoint C; next: layerscale report RUN_DIR --out
    RUN_DIR/report.html``. Each number names its split: without a validation split the final evaluation is the
    test split's (``final test accuracy A ..., test loss L``) and there is no second group; text adds
    ``perplexity``. The ``plots`` extra is named when matplotlib, which the report draws with, is not installed."""
    parts = [f"done in {format_duration(wall_seconds)}: step {result.step}"]
    metrics = result.metrics or {}
    split = metrics.get("on") if metrics.get("on") in ("validation", "test") else "eval"
    accuracy = metrics.get("accuracy")
    if isinstance(accuracy, (int, float)):
        text = f"final {split} accuracy {accuracy:.4f}"
        best = _best_accuracy(Path(result.run_dir), metrics)
        if best is not None:
            text += f" (best {best[0]:.4f} at step {best[1]})"
        parts.append(text)
    for key in ("loss", "perplexity"):
        if isinstance(metrics.get(key), (int, float)):
            parts.append(f"{split} {key} {metrics[key]:.4f}")
    test = getattr(result, "test", None) or {}
    for key in ("accuracy", "loss", "perplexity"):
        if isinstance(test.get(key), (int, float)):
            parts.append(f"test {key} {test[key]:.4f}")
    count = parameter_count(result.checkpoint)
    if count is not None:
        parts.append(f"{count:,} parameters")
    run_dir = shlex.quote(str(result.run_dir))
    report = shlex.quote(str(Path(result.run_dir) / "report.html"))
    import importlib.util

    plots = "" if importlib.util.find_spec("matplotlib") else " (needs pip install 'torch-layerscale[plots]')"
    return (", ".join(parts) + f"; checkpoint {result.checkpoint}; next: layerscale report {run_dir} "
            f"--out {report}{plots}")


def warmup_warning(warmup_steps: int, total_steps: int) -> str | None:
    """The warning for a warmup that never ends (``warmup_steps >= total_steps``), else ``None``."""
    if warmup_steps and warmup_steps >= total_steps:
        return (f"warning: optim.warmup_steps {warmup_steps} >= the run's {total_steps} total steps: the learning "
                "rate never reaches optim.lr and the cosine never starts; lower optim.warmup_steps or train longer")
    return None


def early_stop_on_test_warning(patience: int, eval_on: str) -> str | None:
    """The warning for early stopping that reads the test split (``run.patience`` with no validation split:
    evaluations then read the test split, so the stop, and the best score, are chosen on it), else ``None``."""
    if patience and eval_on == "test":
        return (f"warning: run.patience {patience} stops on the test split (the run has no validation split), so "
                "its test score is no longer held out; set data.validation_fraction (e.g. 0.1) to stop on a "
                "validation split")
    return None


def workers_resume_warning(num_workers: int) -> str:
    """The warning of a run with DataLoader workers: resuming it is exact only where the dataset draws no random
    numbers. Workers are seeded per epoch (``run.seed + epoch``) but their random state is not in a checkpoint,
    and after a mid-epoch resume the remaining batches go to the workers in another order."""
    return (f"data.num_workers={num_workers}: resuming this run from a checkpoint taken inside an epoch is not "
            f"exact if the dataset draws random numbers in __getitem__ (random augmentation): the {num_workers} "
            f"worker process(es)' random state is not saved in checkpoints; set data.num_workers: 0 for an exact "
            f"resume (a dataset without randomness resumes exactly either way)")
