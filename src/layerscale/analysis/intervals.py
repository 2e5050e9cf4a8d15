"""The bootstrap intervals of one analysis, by name, in the form ``analysis.json`` stores them."""

from __future__ import annotations

from typing import Any

import torch

from ..stats.bootstrap import percentile_interval

__all__ = ["IntervalTable"]


class IntervalTable:
    """Percentile intervals of replicates, stored as ``[[low, high], ...]`` (or one ``[low, high]``) under their
    name; names starting ``summary/`` are integer statistics (depths, counts) and get integer bounds."""

    def __init__(self, level: float) -> None:
        self.level = level
        self.values: dict[str, Any] = {}

    def add(self, name: str, replicates: torch.Tensor) -> list:
        low, high = percentile_interval(replicates, self.level, discrete=name.startswith("summary/"))
        value = torch.stack([low, high], dim=-1).tolist()
        self.values[name] = value
        return value
