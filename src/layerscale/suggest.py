""""Did you mean" hints for error messages about unknown names (models, residual methods, config keys, ...).

Close matches are :func:`difflib.get_close_matches` (Ratcliff/Obershelp similarity ≥ ``cutoff``), best first.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]

_LONGEST = 200


def did_you_mean(name: object, choices: Iterable[str], *, cutoff: float = 0.6, limit: int = 3) -> str:
    """``" (did you mean X?)"`` (or ``"X or Y"``) naming the choices closest to ``name``; ``""`` when none is
    close, or ``name`` is not a string or is longer than 200 characters. Meant to follow the unknown name in a
    one-line error message."""
    if not isinstance(name, str) or len(name) > _LONGEST:  # a 200 KB "name" is no typo, and difflib is quadratic
        return ""
    matches = difflib.get_close_matches(name, list(choices), n=limit, cutoff=cutoff)
    if not matches:
        return ""
    return f" (did you mean {' or '.join(matches)}?)"
