"""Safe reading and atomic writing of weight files.

Reading never runs code from the file: safetensors files are parsed by ``safetensors``; PyTorch files go through
``torch.load(weights_only=True)``, which rebuilds tensors and plain containers and refuses anything else. The
format is told from the file's first bytes, not from its name: a PyTorch zip archive starts with ``PK\\x03\\x04``, a
legacy PyTorch pickle with ``\\x80`` (pickle protocol ≥ 2), a safetensors file with an 8-byte little-endian header
length followed by a JSON object (https://github.com/huggingface/safetensors#format).

Writing goes to a temporary file in the destination's directory, is flushed to disk, then renamed over the
destination with ``os.replace``, so a crash or an error never leaves a half-written file and an existing file is
only ever replaced whole.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch

from .atomic_io import atomic_path
from .messages import shown_names, shown_value
from .paths import describe_non_file, os_error_line

__all__ = [
    "STATE_DICT_CONTAINERS",
    "LoadedStateDict",
    "sniff_weights_format",
    "check_safetensors_file",
    "read_state_dict_file",
    "load_state_dict_file",
    "unwrap_state_dict",
    "save_safetensors_atomic",
    "os_error_of",
]

#: Keys under which training scripts store the weights, in the order they are looked for: timm's order first —
#: the EMA weights (``state_dict_ema`` of timm's ``CheckpointSaver``, ``model_ema`` of the official DeiT / CaiT
#: training) before the raw ones, as timm's ``load_checkpoint`` and its pretrained-file loading both take them —
#: then ``model_state_dict``. The key used is reported (``container``).
STATE_DICT_CONTAINERS = ("state_dict_ema", "model_ema", "state_dict", "model", "model_state_dict")

_SAFETENSORS_EXTRA = "pip install safetensors (or 'torch-layerscale[train]')"


@dataclass(frozen=True)
class LoadedStateDict:
    """A state dict read from ``path``: its ``tensors``, the ``file_format`` (``"safetensors"`` or ``"pytorch"``),
    the ``container`` key the weights were found under (``None`` for a bare state dict) and the safetensors
    header ``metadata`` (empty for PyTorch files)."""

    path: Path
    tensors: dict[str, torch.Tensor]
    file_format: str
    container: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


def _require_safetensors():
    try:
        import safetensors.torch
    except ImportError as exc:
        raise ImportError(f"reading or writing safetensors files needs safetensors: {_SAFETENSORS_EXTRA}") from exc
    return safetensors.torch


def sniff_weights_format(path: str | os.PathLike) -> str:
    """``"safetensors"`` or ``"pytorch"`` from the first bytes of ``path``.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for an empty, truncated or foreign file, and
    for a path that is not a regular file (a directory, a FIFO, a device, a /proc file) or cannot be read.
    """
    path = Path(path)
    kind = describe_non_file(path)  # a FIFO would block, /proc/self/mem fails with EIO: name them instead
    if kind is not None:
        raise ValueError(f"{path} is {kind}, expected a weights file (safetensors or PyTorch)")
    if not path.is_file():
        raise FileNotFoundError(f"no such weights file: {path}")
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(9)
    except OSError as exc:
        raise ValueError(f"cannot read weights file {os_error_line(exc, path)}") from None
    if head.startswith(b"PK\x03\x04"):
        _check_pytorch_zip(path)
        return "pytorch"
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pytorch"
    if len(head) == 9 and head[8:9] == b"{":
        header_len = int.from_bytes(head[:8], "little")
        if 8 + header_len > size:
            raise ValueError(f"{path} is a truncated safetensors file: its header says {header_len} bytes, "
                             f"the file has {size - 8} after the length field")
        return "safetensors"
    raise ValueError(f"{path} is not a safetensors or PyTorch weights file ({size} bytes, starts with {head[:8]!r})")


def _check_pytorch_zip(path: Path) -> None:
    """A zip archive is a PyTorch file only if it holds ``<archive>/data.pkl`` (NumPy ``.npz`` files are zips too)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except Exception:  # noqa: BLE001 — BadZipFile, OSError, NotImplementedError (an unknown zip version),
        # UnicodeDecodeError (a mangled name), ...: any failure to list the archive means a corrupt file
        raise ValueError(f"cannot read {path}: truncated or corrupt PyTorch file (not a complete zip "
                         f"archive)") from None
    if not any(name.endswith("data.pkl") for name in names):
        raise ValueError(f"{path} is a zip archive but not a PyTorch checkpoint (no data.pkl; NumPy .npz and JAX "
                         f"checkpoints are not supported)")


#: Bytes per element of each safetensors dtype (https://github.com/huggingface/safetensors#format).
_SAFETENSORS_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1,
                            "F8_E5M2FNUZ": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
                            "I64": 8, "U64": 8, "F64": 8, "C64": 8}
#: The largest header safetensors itself accepts (100 MB).
_SAFETENSORS_MAX_HEADER = 100_000_000


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_safetensors_entry(path: Path, key: str, entry: Any) -> tuple[int, int]:
    """``(begin, end)`` of one tensor entry of a safetensors header, or a ``ValueError`` naming what is wrong."""
    where = f"{path} has a corrupt safetensors header: tensor {key[:80]!r}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is a JSON {type(entry).__name__}, expected an object with dtype, shape and "
                         f"data_offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in _SAFETENSORS_DTYPE_BYTES:
        raise ValueError(f"{where} has dtype {str(dtype)[:40]!r}, expected one of {sorted(_SAFETENSORS_DTYPE_BYTES)}")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise ValueError(f"{where} has shape {str(shape)[:80]}, expected a list of integers >= 0")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise ValueError(f"{where} has data_offsets {str(offsets)[:80]}, expected [begin, end] with "
                         f"0 <= begin <= end")
    numel = 1
    for dim in shape:
        numel *= dim
    if numel * _SAFETENSORS_DTYPE_BYTES[dtype] != offsets[1] - offsets[0]:
        raise ValueError(f"{where}: shape {shape} of {dtype} needs {numel * _SAFETENSORS_DTYPE_BYTES[dtype]} bytes, "
                         f"its data_offsets span {offsets[1] - offsets[0]}")
    return offsets[0], offsets[1]


def _check_safetensors_complete(path: Path) -> None:
    """Raise a one-line ``ValueError`` unless the header is well formed (a JSON object of entries with a known
    dtype, a shape of integers, ``[begin, end]`` offsets whose span matches shape × dtype size, string metadata)
    and the tensors it lists fit in the file (not a cut download)."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        header_len = int.from_bytes(fh.read(8), "little")
        if header_len > _SAFETENSORS_MAX_HEADER:
            raise ValueError(f"{path} has a safetensors header of {header_len} bytes, more than the "
                             f"{_SAFETENSORS_MAX_HEADER} safetensors accepts")
        try:
            header = json.loads(fh.read(header_len))
        except (UnicodeDecodeError, ValueError):  # JSONDecodeError, or an integer too long to convert
            raise ValueError(f"{path} has a corrupt safetensors header (not valid JSON)") from None
        except RecursionError:
            raise ValueError(f"{path} has a corrupt safetensors header (JSON nested too deeply)") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path} has a corrupt safetensors header (a JSON {type(header).__name__}, not an object)")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError(f"{path} has a corrupt safetensors header: __metadata__ must map strings to strings")
    end = max((_check_safetensors_entry(path, key, entry)[1] for key, entry in header.items()
               if key != "__metadata__"), default=0)
    needed = 8 + header_len + end
    if needed > size:
        raise ValueError(f"{path} is a truncated safetensors file: its tensors need {needed} bytes, "
                         f"the file has {size}")


def check_safetensors_file(path: str | os.PathLike) -> None:
    """A one-line ``ValueError`` naming ``path`` unless it is a complete, well-formed safetensors file (the checks of
    :func:`sniff_weights_format` and of its header), for a reader that hands the file to safetensors itself: a cut
    download or an absurd declared shape is named, not safetensors' own message about the folder."""
    path = Path(path)
    if sniff_weights_format(path) != "safetensors":
        raise ValueError(f"{path} is a PyTorch file, expected a safetensors file")
    _check_safetensors_complete(path)


def unwrap_state_dict(obj: Any, source: str = "checkpoint") -> tuple[dict[str, torch.Tensor], str | None]:
    """``(tensors, container)``: ``obj`` itself if it maps names to tensors, else the first of
    :data:`STATE_DICT_CONTAINERS` that does. Raises ``ValueError`` naming what was found instead."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{source} holds a {type(obj).__name__}, expected a dict of tensors (a state dict)")
    if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return _check_names(dict(obj), source), None
    for key in STATE_DICT_CONTAINERS:
        inner = obj.get(key)
        if isinstance(inner, Mapping) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
            return _check_names(dict(inner), source), key
    if not obj:
        raise ValueError(f"{source} holds an empty dict, expected a state dict of tensors")
    non_tensor = [k for k, v in obj.items() if not isinstance(v, torch.Tensor)][:8]
    raise ValueError(f"{source} is not a state dict: top-level keys {shown_names(obj, 12)} include "
                     f"non-tensors {shown_names(non_tensor)}; expected tensors, or tensors under one of "
                     f"{list(STATE_DICT_CONTAINERS)}")


def _check_names(tensors: dict, source: str) -> dict[str, torch.Tensor]:
    bad = [k for k in tensors if not isinstance(k, str)]
    if bad:
        raise ValueError(f"{source} has non-string state-dict keys {shown_names(map(repr, bad), 8)}")
    return tensors


def read_state_dict_file(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> LoadedStateDict:
    """Read the state dict in ``path`` (safetensors, or PyTorch through ``torch.load(weights_only=True)``).

    Weights nested under ``"model"``, ``"state_dict"`` or ``"model_state_dict"`` are found and the key recorded in
    ``container``. Missing files raise ``FileNotFoundError``; truncated, corrupt or foreign files, and PyTorch
    files holding arbitrary Python objects, raise a one-line ``ValueError``.
    """
    path = Path(path)
    file_format = sniff_weights_format(path)
    if file_format == "safetensors":
        _check_safetensors_complete(path)
        st = _require_safetensors()
        from safetensors import safe_open

        try:
            tensors = st.load_file(str(path), device=str(map_location))
            with safe_open(str(path), framework="pt") as fh:
                metadata = dict(fh.metadata() or {})
        except Exception as exc:  # safetensors raises its own SafetensorError for corrupt files
            raise ValueError(f"cannot read {path} as safetensors: {str(exc).splitlines()[0]}") from None
        tensors, container = unwrap_state_dict(tensors, str(path))
        return LoadedStateDict(path, tensors, "safetensors", container, metadata)
    try:
        # An open file, not the path: torch.load picks safetensors by a ".safetensors" name, we go by content.
        with path.open("rb") as fh, warnings.catch_warnings():
            # torch warns about pickle protocols other than 2 on its way to a refusal: the refusal is the message.
            warnings.simplefilter("ignore")
            obj = torch.load(fh, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(f"{path} holds Python objects other than tensors and plain containers; refusing to "
                         f"unpickle it (torch.load weights_only=True) — re-save it as a plain state dict or as "
                         f"safetensors") from None
    except Exception as exc:  # noqa: BLE001 — a corrupt stream fails anywhere in the (code-free) unpickler:
        # RuntimeError / EOFError from the zip reader, IndexError / KeyError / TypeError on a malformed opcode stream
        message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ValueError(f"cannot read {path}: truncated or corrupt PyTorch file ({type(exc).__name__}: "
                         f"{message})") from None
    tensors, container = unwrap_state_dict(obj, str(path))
    return LoadedStateDict(path, tensors, "pytorch", container)


def load_state_dict_file(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of :func:`read_state_dict_file` (``name -> tensor``), for ``model.load_state_dict``."""
    return read_state_dict_file(path, map_location).tensors


def _independent_tensors(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached, contiguous tensors that share no storage (safetensors refuses aliased tensors, e.g. the views
    ``torch.chunk`` returns, so later aliases are cloned)."""
    out: dict[str, torch.Tensor] = {}
    seen: set[tuple[str, int]] = set()
    for name, tensor in state_dict.items():
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            raise ValueError(f"state_dict must map str to Tensor, got {shown_value(name)}: {type(tensor).__name__}")
        t = tensor.detach()
        storage = (str(t.device), t.untyped_storage().data_ptr())
        if storage in seen or not t.is_contiguous() or t.storage_offset() != 0:
            t = t.clone(memory_format=torch.contiguous_format)
            storage = (str(t.device), t.untyped_storage().data_ptr())
        seen.add(storage)
        out[name] = t
    return out


def save_safetensors_atomic(state_dict: Mapping[str, torch.Tensor], path: str | os.PathLike,
                            metadata: Mapping[str, str] | None = None) -> Path:
    """Write ``state_dict`` to ``path`` as safetensors, atomically; return the path.

    The file is written to a temporary name in the same directory, flushed with ``fsync`` and renamed over
    ``path`` (``os.replace``), so ``path`` is either untouched or complete. ``metadata`` (str → str) goes into the
    safetensors header. Hugging Face loaders require ``metadata["format"] == "pt"``, which is set unless given.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"directory of {path} does not exist")
    if path.is_dir():
        raise ValueError(f"{path} is a directory, expected a file path")
    meta = {"format": "pt"}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"safetensors metadata must map str to str, got {key!r}: {value!r}")
        meta[key] = value
    tensors = _independent_tensors(state_dict)
    st = _require_safetensors()
    with atomic_path(path) as tmp:
        try:
            st.save_file(tensors, str(tmp), metadata=meta)
        except Exception as exc:  # noqa: BLE001 — safetensors reports the system's error as its own SafetensorError
            error = os_error_of(exc)
            if error is None:
                raise
            raise OSError(error, os.strerror(error), str(path)) from None
    return path


def os_error_of(exc: BaseException) -> int | None:
    """The ``errno`` behind a failed write (a full disk, a quota, an I/O error): the first ``OSError`` in ``exc``'s
    chain, or the ``(os error N)`` of a message from Rust or C++ code (safetensors), else ``None``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            return seen.errno
        seen = seen.__cause__ or seen.__context__
    found = re.search(r"\(os error (\d+)\)", str(exc))
    return int(found.group(1)) if found else None
