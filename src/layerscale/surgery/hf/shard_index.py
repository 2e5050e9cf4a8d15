"""The shard files a Hugging Face checkpoint's index names, checked before any library opens one.

A sharded checkpoint (``save_pretrained`` with ``max_shard_size``) keeps an index, ``model.safetensors.index.json``
or ``pytorch_model.bin.index.json``, whose ``"weight_map"`` maps every weight to the name of the shard file holding
it. transformers (``modeling_utils``, the sharded-checkpoint path) joins each name to the folder as it is written,
so a name that is absolute (``/elsewhere/model.safetensors``) or climbs out (``../other/model.safetensors``) loads
weights from anywhere on the disk: a link by another name, which a folder someone else made must not be able to
make. :func:`checked_shard_names` reads the index bounded (:mod:`layerscale.untrusted_files`) and accepts only bare
file names of files directly in the folder, before transformers reads it.

Links: the model resolver (:mod:`layerscale.sources.model_folder`) refuses a folder holding any link before it
gets here; a Hugging Face Hub snapshot (``snapshot_download``) is made of links into the hub's own cache, so the
index is read through its resolved path and a shard is checked by name and existence, not by being a regular file.

:func:`checkpoint_tensors` yields the tensors of a safetensors checkpoint as its folder says they are: the single
``model.safetensors``, or every weight from the shard the index names for it. A folder holding both is refused
(transformers reads the single file, so a sharded copy beside it would be a second, unread model), and so is a
shard holding a weight the index places in another shard, or lacking one it places there: transformers reads
every tensor of every shard, so which copy it loads would not be the one the index names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

import torch

from ...untrusted_files import UntrustedFileError, parse_json, read_regular_file

__all__ = ["INDEX_FILES", "MAX_INDEX_BYTES", "SAFETENSORS_INDEX", "SINGLE_FILE", "checked_shard_names",
           "checkpoint_tensors"]

#: the one weights file of an unsharded safetensors checkpoint
SINGLE_FILE = "model.safetensors"

SAFETENSORS_INDEX = "model.safetensors.index.json"
#: the index files transformers reads for a sharded checkpoint (safetensors first, as it does)
INDEX_FILES = (SAFETENSORS_INDEX, "pytorch_model.bin.index.json")
#: an index larger than this is refused (a 70B model's index is about 100 kB)
MAX_INDEX_BYTES = 16 << 20


def _bare_name(name: object) -> bool:
    """Whether ``name`` is a file name with no folder part on any platform (no ``/``, no ``\\``, no drive), nor
    ``.`` / ``..``."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "\x00" not in name
            and PurePosixPath(name).name == name and PureWindowsPath(name).name == name)


def checked_shard_names(folder: str | Path) -> dict[str, list[str]]:
    """``{index file: its shard names, sorted and distinct}`` for each index of :data:`INDEX_FILES` in ``folder``
    (empty when the checkpoint is not sharded). :class:`~layerscale.untrusted_files.UntrustedFileError` (one line
    naming the index and the entry) when an index is larger than :data:`MAX_INDEX_BYTES`, is not a JSON object
    with a ``"weight_map"`` object of names, or names a shard that is not a bare file name of a file directly in
    ``folder``."""
    folder = Path(folder)
    found = {}
    for index in INDEX_FILES:
        path = folder / index
        if not path.exists() and not path.is_symlink():
            continue
        content = parse_json(read_regular_file(path.resolve(), MAX_INDEX_BYTES), str(path))
        weight_map = content.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise UntrustedFileError(f"{path}: expected a JSON object with a non-empty \"weight_map\" object "
                                     "(weight name → shard file name)")
        names = set()
        for weight, name in weight_map.items():
            if not _bare_name(name):
                raise UntrustedFileError(f"{path}: weight {str(weight)[:80]!r} is mapped to {str(name)[:120]!r}; "
                                         "expected the bare name of a shard file in the same folder")
            names.add(name)
        for name in sorted(names):
            if not (folder / name).is_file():
                raise UntrustedFileError(f"{path}: names the shard {name!r}, which is not a file in {folder}")
        found[index] = sorted(names)
    return found


def _weight_map(folder: Path) -> dict[str, str]:
    """The safetensors index's ``weight_map`` (names already checked by :func:`checked_shard_names`)."""
    path = folder / SAFETENSORS_INDEX
    return parse_json(read_regular_file(path.resolve(), MAX_INDEX_BYTES), str(path))["weight_map"]


def checkpoint_tensors(folder: str | Path, keep: Callable[[str], bool] | None = None
                       ) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` for every weight of the safetensors checkpoint in ``folder`` (those whose name ``keep``
    accepts, when given), one tensor read at a time (module docstring); the placement checks read every shard's
    header first. ``FileNotFoundError`` when there is none; a one-line
    :class:`~layerscale.untrusted_files.UntrustedFileError` for a folder with both a single file and an index, or
    whose shards do not hold exactly what the index places in each."""
    from safetensors import safe_open

    folder = Path(folder)
    shards = checked_shard_names(folder).get(SAFETENSORS_INDEX)
    single = folder / SINGLE_FILE
    if shards is not None and (single.exists() or single.is_symlink()):
        raise UntrustedFileError(f"{folder}: holds both {SINGLE_FILE} and {SAFETENSORS_INDEX} (two checkpoints: "
                                 f"transformers reads the first, the shards would be ignored); keep one")
    if shards is None:
        if not single.is_file():
            raise FileNotFoundError(f"{folder}: no {SINGLE_FILE} (or {SAFETENSORS_INDEX}); save the model with "
                                    "save_pretrained (safetensors is the default)")
        placement = {SINGLE_FILE: None}
    else:
        weight_map = _weight_map(folder)
        placement = {shard: sorted(w for w, s in weight_map.items() if s == shard) for shard in shards}
    for file, expected in placement.items():  # every header first: a bad placement refused before any tensor
        with safe_open(str(folder / file), framework="pt") as handle:
            held = list(handle.keys())
        if expected is not None and set(held) != set(expected):
            stray, absent = sorted(set(held) - set(expected)), sorted(set(expected) - set(held))
            what = (f"holds {stray[0]!r}, which the index places elsewhere" if stray
                    else f"lacks {absent[0]!r}, which the index places there")
            raise UntrustedFileError(f"{folder / file}: {what} ({SAFETENSORS_INDEX}); expected each weight in "
                                     "exactly the shard its index names")
    for file in placement:
        with safe_open(str(folder / file), framework="pt") as handle:
            for name in handle.keys():
                if keep is None or keep(name):
                    yield name, handle.get_tensor(name)
