"""Early stopping on the evaluation metric: stop after ``patience`` evaluations in a row without improvement.

The rule (Prechelt 1998, "Early Stopping — But When?", the "patience" criterion as in Keras / Lightning): with
``m_t`` the metric of evaluation ``t`` and ``best = max_{s<t} m_s`` (accuracy; for a loss the signs flip), the
evaluation improves when ``m_t > best + min_delta``; the run stops at the ``patience``-th evaluation in a row that
does not. The state is three numbers, saved in every checkpoint so a resumed run stops where an uninterrupted one
would.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["EarlyStopping"]


@dataclass
class EarlyStopping:
    """``patience`` 0 disables it; ``mode`` is ``"max"`` (accuracy) or ``"min"`` (loss)."""

    patience: int
    min_delta: float = 0.0
    mode: str = "max"
    best: float | None = None
    best_step: int | None = None
    evals_without_improvement: int = 0
    stopped_step: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("max", "min"):
            raise ValueError(f"early-stopping mode must be 'max' or 'min', got {self.mode!r}")

    @property
    def stopped(self) -> bool:
        return self.stopped_step is not None

    def update(self, value: float, step: int) -> bool:
        """Record the metric of the evaluation at ``step``; returns ``True`` when the run should stop now.

        A non-finite value never improves."""
        improved = math.isfinite(value) and (
            self.best is None
            or (value > self.best + self.min_delta if self.mode == "max" else value < self.best - self.min_delta))
        if improved:
            self.best, self.best_step, self.evals_without_improvement = float(value), int(step), 0
        else:
            self.evals_without_improvement += 1
        if self.patience and not improved and self.evals_without_improvement >= self.patience:
            self.stopped_step = int(step)
        return self.stopped

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("patience", "min_delta", "mode")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state.get("best")
        self.best_step = state.get("best_step")
        self.evals_without_improvement = int(state.get("evals_without_improvement", 0))
        self.stopped_step = state.get("stopped_step")
