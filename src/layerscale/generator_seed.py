"""The seeds torch's random generators take: one check shared by every function that seeds a ``torch.Generator``.

``torch.Generator.manual_seed`` takes a 64-bit integer, signed or unsigned: ``[-2**63, 2**64 - 1]``. Outside it
torch raises a ``RuntimeError`` about an overflow; a float or a bool would be taken silently as another seed.
"""

from __future__ import annotations

import numbers

from .messages import shown_value

__all__ = ["GENERATOR_SEED_RANGE", "check_generator_seed"]

#: the seeds ``torch.Generator.manual_seed`` takes: a 64-bit integer, signed or unsigned
GENERATOR_SEED_RANGE = (-(2**63), 2**64 - 1)


def check_generator_seed(seed: object, name: str = "seed") -> int:
    """``seed`` as an ``int`` when it is an integer (a Python or NumPy one, not a bool) in
    :data:`GENERATOR_SEED_RANGE`; otherwise a one-line ``ValueError`` naming ``name``, the value and the range."""
    low, high = GENERATOR_SEED_RANGE
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not low <= seed <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {shown_value(seed)}")
    return int(seed)
