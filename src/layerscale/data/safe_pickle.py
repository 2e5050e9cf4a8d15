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

from ..messages import shown_name
from ..paths import refuse_non_file

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


#: Bytes one array of a CIFAR pickle may take (the largest real one, CIFAR-100's train batch, has 150 MB).
MAX_ARRAY_BYTES = 1 << 30


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
    reconstruct = multiarray._reconstruct

    def bounded_reconstruct(subtype: Any, shape: Any, dtype: Any) -> Any:
        # _reconstruct allocates `shape` before the data arrives (numpy pickles call it with shape (0,) and then
        # fill the array by __setstate__), so a 100-byte file could ask for 745 GiB here.
        try:
            count = 1
            for side in shape if isinstance(shape, (tuple, list)) else (shape,):
                count *= int(side)
            size = count * numpy.dtype(dtype).itemsize
        except (TypeError, ValueError, OverflowError):
            raise pickle.UnpicklingError(f"array of shape {shape!r:.80} and dtype {dtype!r:.40} cannot be built") \
                from None
        if size > MAX_ARRAY_BYTES:
            raise pickle.UnpicklingError(f"an array of shape {shape!r:.80} ({size:,} bytes) is larger than any CIFAR "
                                         f"batch ({MAX_ARRAY_BYTES:,} bytes at most)")
        return reconstruct(subtype, shape, dtype)

    return bounded_reconstruct


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
    pickle, is truncated, references any global outside `ALLOWED_GLOBALS`, or builds an array larger than
    `MAX_ARRAY_BYTES` (checked before it is allocated), and a one-line ValueError naming what `path` is when it is
    there but no regular file (a directory, a FIFO: never opened).
    """
    path = Path(path)
    refuse_non_file(path, "a pickle file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found")
    with path.open("rb") as f:
        try:
            return RestrictedUnpickler(f, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError) as err:
            raise ValueError(f"{path}: unreadable or unsafe pickle: {shown_name(err, 300)}") from None
        except MemoryError as err:  # any other route to a huge allocation (a declared length, numpy's setstate)
            raise ValueError(f"{path}: unreadable pickle: it asks for more memory than this machine has "
                             f"({shown_name(err, 200)})") from None
