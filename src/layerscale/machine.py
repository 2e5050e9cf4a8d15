"""What this machine has, for the bounds checked before allocating (a model's weights, a resized dataset)."""

from __future__ import annotations

import os

__all__ = ["machine_memory_bytes"]


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine in bytes, or ``None`` where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
