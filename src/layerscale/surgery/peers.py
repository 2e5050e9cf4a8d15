"""Classes of peer libraries (timm, transformers), looked up only when the library is already imported.

A model built with timm or transformers has imported it; a model that has not cannot contain their modules. So
surgery recognises peer modules without ever importing a peer library itself (no import cost, no dependency).
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["loaded_classes", "loaded_table_classes"]


def loaded_classes(module: str, *names: str) -> tuple[type, ...]:
    """The classes ``module.name`` that exist, if ``module``'s top-level package is already imported; else ``()``."""
    if module.split(".")[0] not in sys.modules:
        return ()
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return ()
    return tuple(cls for cls in (getattr(mod, name, None) for name in names) if isinstance(cls, type))


def loaded_table_classes(table: dict[str, str]) -> tuple[type, ...]:
    """The classes of a ``{module: class name}`` table whose module is loaded (:func:`loaded_classes` of each)."""
    return tuple(cls for module, name in table.items() for cls in loaded_classes(module, name))
