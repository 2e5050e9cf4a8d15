"""A pickle reader that can rebuild numpy arrays and nothing else.

Unpickling runs whatever callable the file names, so a plain `pickle.load` of a downloaded file is
arbitrary code execution. CIFAR batches only hold dicts, lists, strings, bytes, ints and uint8 numpy
arrays; the first five are pickle opcodes that import nothing, and arrays need exactly three globals.
"""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path
from typing import Any

# (module, name) pairs a CIFAR pickle may reference. numpy 2 renamed numpy.core to numpy._core, and
# files written by either numpy (the real CIFAR files come from Python 2's numpy) must load.
ALLOWED_GLOBALS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)


def _require_numpy() -> Any:
    try:
        import numpy
    except ImportError as err:
        raise ImportError("reading CIFAR pickles needs numpy: pip install numpy") from err
    return numpy


def _allowed_object(module: str, name: str) -> Any:
    numpy = _require_numpy()
    if name != "_reconstruct":
        return getattr(numpy, name)
    # Resolve _reconstruct ourselves rather than importing the module named in the file: importing
    # numpy.core under numpy 2 warns, and we never want to import a module a file chose.
    try:
        multiarray = importlib.import_module("numpy._core.multiarray")
    except ImportError:  # numpy 1.x
        multiarray = importlib.import_module("numpy.core.multiarray")
    return multiarray._reconstruct


class RestrictedUnpickler(pickle.Unpickler):
    """`pickle.Unpickler` whose `find_class` allows only `ALLOWED_GLOBALS` (numpy array
    reconstruction) and raises `pickle.UnpicklingError` naming any other global, before it is imported."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED_GLOBALS:
            return _allowed_object(module, name)
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}: only numpy arrays are allowed")


def safe_load_pickle(path: str | Path) -> Any:
    """Unpickle `path` with `RestrictedUnpickler` (latin1 for Python 2 strings, as numpy recommends).

    Raises FileNotFoundError if `path` is missing, and ValueError naming the file if it is not a
    pickle, is truncated, or references any global outside `ALLOWED_GLOBALS`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found")
    with path.open("rb") as f:
        try:
            return RestrictedUnpickler(f, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError) as err:
            raise ValueError(f"{path}: unreadable or unsafe pickle: {err}") from err
