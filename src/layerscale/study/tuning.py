"""Learning-rate tuning by successive halving (Jamieson & Talwalkar 2016, "Non-stochastic Best Arm Identification
and Hyperparameter Optimization", Algorithm 1; the rung schedule of ASHA, Li et al. 2020).

For one (method, depth) cell and ``n`` candidate learning rates: rung 0 trains every rate, with the tuning seed,
for ``min_budget`` of the full budget ``B``; each rung keeps the best ``⌈n_i / η⌉`` rates by validation score and
continues them to ``η`` times the budget of the rung before, until one rate is left (or the full budget is reached,
and the best there is chosen). A run is paused at its rung (``run.stop_at_step``) on the learning-rate schedule of
the full budget, so continuing it to the next rung is an exact resume: no step is trained twice.

Cost: with ``n = 3``, ``η = 3`` and ``min_budget = ¼`` a cell spends ``3 × B/4`` on tuning, i.e. a tuned study with
3 seeds costs ``(0.75 + 3) / 3 = 1.25×`` the untuned one at the same final budget.

The score of a run at a rung is its last validation evaluation at or before the rung's step: accuracy (higher is
better) for classifiers, loss for language models (lower is better). A run that diverged, or has no evaluation,
ranks last. Ties keep the order of the ``lrs`` list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..train.metrics_log import METRICS_FILE, read_metrics

__all__ = ["rung_steps", "run_score", "select", "RungResult"]


def rung_steps(total_steps: int, candidates: int, min_budget: float, halving_rate: int) -> list[int]:
    """The pause steps of the rungs for ``candidates`` learning rates: ``⌈B·min_budget·η^i⌉`` (capped at ``B``)
    while more than one rate is left. Empty for a single candidate (nothing to tune)."""
    steps, n, fraction = [], candidates, min_budget
    while n > 1:
        stop = min(total_steps, max(1, math.ceil(total_steps * fraction)))
        steps.append(stop)
        if stop >= total_steps:
            break
        n, fraction = math.ceil(n / halving_rate), fraction * halving_rate
    return steps


def run_score(run_dir: Path, stop_step: int, higher_is_better: bool, diverged: bool = False) -> float:
    """The run's last evaluation (``split: eval``, the validation split) at or before ``stop_step``, signed so
    that larger is better; ``-inf`` for a diverged run or one without an evaluation."""
    if diverged:
        return -math.inf
    metric = "accuracy" if higher_is_better else "loss"
    evals = [r for r in read_metrics(run_dir / METRICS_FILE)
             if r.get("split") == "eval" and int(r.get("step", 0)) <= stop_step]
    if not evals:
        return -math.inf
    try:
        value = float(evals[-1][metric])
    except (KeyError, TypeError, ValueError):
        return -math.inf
    if not math.isfinite(value):
        return -math.inf
    return value if higher_is_better else -value


@dataclass(frozen=True)
class RungResult:
    """One rung of one cell: the step it ran to, each rate's score (signed, larger is better) and who went on."""

    rung: int
    step: int
    scores: dict[float, float]
    kept: tuple[float, ...]


def select(scores: dict[float, float], order: tuple[float, ...], keep: int) -> tuple[float, ...]:
    """The ``keep`` best rates by score, ties broken by their position in ``order``."""
    ranked = sorted(scores, key=lambda lr: (-scores[lr], order.index(lr)))
    return tuple(ranked[:keep])
