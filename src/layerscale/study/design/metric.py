"""What a study scores: test accuracy in % for classifiers, bits per byte for the byte-level language models.

Part of the design (the plan records it; every table, figure and report reads it), so it lives below them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Metric", "finite_number"]


def finite_number(value) -> float | None:
    """``value`` as a finite float, or ``None`` (missing, not a number, or not finite)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Metric:
    """How a study scores runs: ``name`` as printed, ``higher_is_better``, and whether it is a classifier's."""

    name: str
    higher_is_better: bool
    classification: bool

    @classmethod
    def for_language_model(cls, is_lm: bool) -> Metric:
        return cls("test bits per byte", False, False) if is_lm else cls("test accuracy (%)", True, True)

    @property
    def digits(self) -> int:
        """Decimals the tables print: 1 for accuracy in %, 3 for bits per byte."""
        return 1 if self.classification else 3

    @property
    def difference_unit(self) -> str:
        """The unit of a difference between two values of the metric, as the sentences print it."""
        return "points" if self.classification else "bits per byte"

    def from_record(self, record: dict) -> float | None:
        """The metric of one evaluation record (accuracy → %, loss → bits per byte); ``None`` when the record has
        no finite value in range."""
        key = "accuracy" if self.classification else "loss"
        value = finite_number(record.get(key))
        if value is None or value < 0 or (self.classification and value > 1):
            return None  # no value, or one a record cannot hold (an accuracy outside [0, 1], a negative loss)
        return 100.0 * value if self.classification else value / math.log(2)

    @property
    def value_range(self) -> tuple[float, float]:
        """The range of one value: [0, 100] for accuracy in %, [0, ∞) for bits per byte."""
        return (0.0, 100.0) if self.classification else (0.0, math.inf)

    @property
    def difference_range(self) -> tuple[float, float]:
        """The range of a difference of two values: [−100, 100] points, or unbounded bits per byte."""
        return (-100.0, 100.0) if self.classification else (-math.inf, math.inf)

    def reached(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target
