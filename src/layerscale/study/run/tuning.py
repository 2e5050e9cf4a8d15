"""Learning-rate selection for one (method, depth) cell: scores, the choice with ties, and the rung schedule.

Two modes (``StudySpec.tuning``), both scored on the validation split only:

- ``halving``: successive halving (Jamieson & Talwalkar 2016, "Non-stochastic Best Arm Identification and
  Hyperparameter Optimization", Algorithm 1; the rung schedule of ASHA, Li et al. 2020). For ``n`` candidate rates
  rung 0 trains every rate with each of the ``tune_seeds`` tuning seeds for ``min_budget`` of the full budget
  ``B``; each rung keeps the best ``⌈n_i / η⌉`` rates by their mean score over the tuning seeds and continues them
  to ``η`` times the budget of the rung before, until one rate is left. A run pauses at its rung
  (``run.stop_at_step``) on the learning-rate schedule of the full budget, so continuing it is an exact resume.
  The default (2 seeds from half the budget) answers the short-horizon bias of one seed at a quarter of the
  budget (Wu et al. 2018, "Understanding Short-Horizon Bias in Stochastic Meta-Optimization": rates chosen on short
  runs are biased small). Cost with ``n = 3``, ``η = 3``: ``3 × 2 × B/2 = 3B`` per cell, i.e. ``(3 + S)/S`` times
  an untuned study with ``S`` reported seeds (2.0× at 3 seeds).
- ``grid``: every rate × every reported seed at the full budget (the final runs themselves); the cell's rate is the
  one with the best mean *validation* score at the end of its runs, and the test split of the other rates is never
  reported. No horizon bias at all; costs ``n×`` an untuned study (3× for 3 rates), less the shared table, which
  it contains when the shared rate is in the grid.

**Ties** (:func:`choose_rate`): the rate with the best mean score is compared with every other rate seed by seed
(the same tuning seeds, hence the same data order); a rate whose mean is within one standard error of the paired
difference of the best (``mean(best − r) ≤ s_d / √k``) is tied with it — the one-standard-error rule (Breiman et
al. 1984, *Classification and Regression Trees*, §3.4.3; Hastie, Tibshirani & Friedman 2009, *The Elements of
Statistical Learning*, 2nd ed., §7.10). With one seed only exactly equal scores tie. Among tied rates the one
nearest the shared rate (on a log scale) is chosen, so a tie never moves a cell away from what an untuned user
gets; the tie is reported as such, not as "the rate it did best with".

**Grid extension** (:func:`extension_for_best`): when a cell's **best mean** is at the smallest or the largest rate it
has, the study adds the rate one step further (``÷3`` or ``×3``), scores it the same way, and chooses again, at most
``extend_grid`` times per cell. The extension reads the best mean, never the tie rule's choice: a tie resolved
toward the shared rate can pull the choice inward from an edge whose rate did best, and the better rate may lie
beyond it (issue 60). Only once the extension has run does the tie rule choose among every rate tried. A best mean
shared with another rate (a method at chance at every rate) or one where every rate failed is at no edge.

The score of a run at a step is its last validation evaluation at or before that step: accuracy (higher is better)
for classifiers, loss for language models (lower is better). A run that diverged, or has no evaluation, scores
``-inf`` and ranks last.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ...train.records.metrics_log import METRICS_FILE, read_metrics

__all__ = ["rung_steps", "run_score", "select", "RungResult", "RateChoice", "choose_rate", "EXTENSION_FACTOR",
           "extension_rate", "extension_for_best", "mean_score"]

#: the step of a grid extension: one rate ×3 above the largest or ÷3 below the smallest
EXTENSION_FACTOR = 3.0


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
    """One rung of one cell: the step it ran to, each rate's mean score over the tuning seeds (signed, larger is
    better), the per-seed scores, and who went on."""

    rung: int
    step: int
    scores: dict[float, float]
    kept: tuple[float, ...]
    per_seed: dict[float, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class RateChoice:
    """The chosen rate of a cell, the rate with the best mean score, and the rates tied with it (the chosen one
    included; one entry when there is no tie)."""

    lr: float
    best: float
    tied: tuple[float, ...]

    @property
    def is_tie(self) -> bool:
        return len(self.tied) > 1


def mean_score(values) -> float:
    """The mean of per-seed scores; ``-inf`` when any seed failed (diverged or never evaluated)."""
    values = list(values)
    if any(v == -math.inf for v in values):
        return -math.inf
    return sum(values) / len(values)


def _tied_with(best: tuple[float, ...], other: tuple[float, ...]) -> bool:
    """The one-standard-error rule on the paired per-seed differences ``best − other``."""
    if mean_score(best) == -math.inf:  # every rate failed: nothing distinguishes them
        return mean_score(other) == -math.inf
    if mean_score(other) == -math.inf:
        return False
    diffs = [b - o for b, o in zip(best, other)]
    mean = sum(diffs) / len(diffs)
    if len(diffs) < 2:
        return mean == 0.0
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    return mean <= sd / math.sqrt(len(diffs))


def choose_rate(per_seed: dict[float, tuple[float, ...]], shared_lr: float, order: tuple[float, ...] = ()) \
        -> RateChoice:
    """The cell's rate from each rate's per-seed scores (signed, larger is better; the same seeds in the same
    order for every rate): the best mean, its ties by the one-standard-error rule, and among the tied the rate
    nearest ``shared_lr`` on a log scale (then the better mean, then ``order``)."""
    if not per_seed:
        raise ValueError("choose_rate needs at least one scored rate")
    rates = list(per_seed)
    position = {lr: (order.index(lr) if lr in order else len(order) + i) for i, lr in enumerate(rates)}
    best = max(rates, key=lambda lr: (mean_score(per_seed[lr]), -position[lr]))
    tied = tuple(sorted(lr for lr in rates if lr == best or _tied_with(per_seed[best], per_seed[lr])))
    chosen = min(tied, key=lambda lr: (abs(math.log(lr / shared_lr)), -mean_score(per_seed[lr]), position[lr]))
    return RateChoice(chosen, best, tied)


def extension_rate(rates: tuple[float, ...], chosen: float) -> float | None:
    """The rate one step beyond the edge ``chosen`` sits on (``None`` when it is inside the cell's rates)."""
    if len(rates) < 2:
        return None
    if chosen == max(rates):
        return float(f"{chosen * EXTENSION_FACTOR:.6g}")
    if chosen == min(rates):
        return float(f"{chosen / EXTENSION_FACTOR:.6g}")
    return None


def extension_for_best(per_seed: dict[float, tuple[float, ...]], rates: tuple[float, ...], choice: RateChoice) \
        -> float | None:
    """The rate to add when the cell's **best mean** (``choice.best``, whatever the tie rule took) is the smallest or
    the largest of ``rates``; ``None`` when it is inside them, when every rate failed, or when another rate has the
    very same mean (no edge holds the best alone)."""
    best = mean_score(per_seed[choice.best])
    if best == -math.inf or any(lr != choice.best and mean_score(v) == best for lr, v in per_seed.items()):
        return None
    return extension_rate(rates, choice.best)


def select(scores: dict[float, float], order: tuple[float, ...], keep: int) -> tuple[float, ...]:
    """The ``keep`` best rates by score, ties broken by their position in ``order``."""
    ranked = sorted(scores, key=lambda lr: (-scores[lr], order.index(lr)))
    return tuple(ranked[:keep])
