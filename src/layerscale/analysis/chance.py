"""Is the model at chance? A depth measure of a model that has learned nothing says nothing about its depth.

A classifier over ``C`` classes that predicts the uniform distribution has cross-entropy ``ln C``; a language model
over a vocabulary of ``V`` tokens, ``ln V``. The analysis flags a model whose evaluation loss is within
:data:`CHANCE_MARGIN` (5 %) of that or above it, ``loss ≥ (1 − 0.05) · ln K`` (``K = C`` or ``V``): removing its
blocks cannot cost much, so a small effective depth would be read as a finding when it is only the absence of one.
"""

from __future__ import annotations

import math

__all__ = ["CHANCE_MARGIN", "chance_loss", "near_chance", "chance_note"]

#: The relative margin of the flag: within 5 % of ``ln K``.
CHANCE_MARGIN = 0.05


def chance_loss(outputs: int) -> float:
    """``ln K``: the cross-entropy of the uniform prediction over ``outputs`` classes or vocabulary entries."""
    if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 2:
        raise ValueError(f"the number of classes or vocabulary entries must be an int >= 2, got {outputs!r}")
    return math.log(outputs)


def near_chance(loss: float, outputs: int, margin: float = CHANCE_MARGIN) -> bool:
    """Whether ``loss ≥ (1 − margin) · ln outputs`` (a NaN loss is flagged too)."""
    return not loss < (1.0 - margin) * chance_loss(outputs)


def chance_note(loss: float, outputs: int, task: str) -> str | None:
    """A one-line warning when :func:`near_chance`, else ``None``."""
    if not near_chance(loss, outputs):
        return None
    what = "vocabulary" if task == "language_model" else "classes"
    return (f"WARNING: loss {loss:.4g} is within {CHANCE_MARGIN:.0%} of chance (ln {outputs} {what} = "
            f"{chance_loss(outputs):.4g}): the model has not learned, so its depth measures mean little")
