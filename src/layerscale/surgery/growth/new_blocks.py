"""Which blocks of a grown model are new, and training only those (LLaMA Pro, Wu et al. 2024, §3: the expanded
blocks are trained, the original blocks, embeddings and head are frozen).

:func:`~layerscale.surgery.grow` records the indices (0-based, in the grown stack) on the model as
``model.layerscale_new_blocks`` — and, for a Hugging Face model, in its config, so ``save_pretrained`` writes it
— and the model files it writes carry them as the ``config.json`` key ``layerscale_new_blocks``, which the trainer
reads back (``run.init_from`` with ``optim.trainable: new_blocks``).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from torch import nn

from ...untrusted_files import MAX_CONFIG_BYTES, parse_json, read_regular_file
from ..block_list import block_family

__all__ = ["NEW_BLOCKS_KEY", "new_block_indices", "new_block_modules", "read_new_blocks", "record_new_blocks",
           "forget_new_blocks", "freeze_all_but_new_blocks"]

NEW_BLOCKS_KEY = "layerscale_new_blocks"
_NOTE_PREFIX = f"{NEW_BLOCKS_KEY}: "


def _timm_notes(model: nn.Module) -> list[str] | None:
    cfg = model.__dict__.get("pretrained_cfg")
    if not isinstance(cfg, dict):
        return None
    return [str(note) for note in (cfg.get("notes") or ())]


def _set_timm_note(model: nn.Module, indices: list[int] | None) -> None:
    notes = _timm_notes(model)
    if notes is None:
        return
    notes = [note for note in notes if not note.startswith(_NOTE_PREFIX)]
    if indices is not None:
        notes.append(f"{_NOTE_PREFIX}{indices}")
    model.pretrained_cfg = {**model.pretrained_cfg, "notes": tuple(notes) or None}


def record_new_blocks(model: nn.Module, indices: list[int]) -> None:
    """Record ``indices`` as the new blocks of ``model`` (replacing an earlier record), on the model and where its
    library saves it (module docstring)."""
    model.__dict__[NEW_BLOCKS_KEY] = tuple(int(i) for i in indices)
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_dict"):  # a Hugging Face config: written by save_pretrained
        setattr(config, NEW_BLOCKS_KEY, [int(i) for i in indices])
    _set_timm_note(model, [int(i) for i in indices])


def forget_new_blocks(model: nn.Module) -> None:
    """Drop every new-block record of ``model`` (after pruning, the indices no longer hold)."""
    model.__dict__.pop(NEW_BLOCKS_KEY, None)
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, NEW_BLOCKS_KEY):
        delattr(config, NEW_BLOCKS_KEY)
    _set_timm_note(model, None)


def _from_timm_note(model: nn.Module) -> tuple[int, ...] | None:
    for note in _timm_notes(model) or ():
        if note.startswith(_NOTE_PREFIX):
            try:
                value = ast.literal_eval(note[len(_NOTE_PREFIX):])
            except (ValueError, SyntaxError):
                value = None
            if not (isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)):
                raise ValueError(f"pretrained_cfg note {note!r}: expected '{_NOTE_PREFIX}[i, j, ...]'")
            return tuple(value)
    return None


def new_block_indices(model: nn.Module) -> tuple[int, ...] | None:
    """The recorded new blocks of ``model`` (on the model, its Hugging Face config or its timm
    ``pretrained_cfg``), or ``None`` when it was not grown."""
    model = getattr(model, "module", model)  # DDP's wrapper
    found = model.__dict__.get(NEW_BLOCKS_KEY)
    if found is None:
        found = getattr(getattr(model, "config", None), NEW_BLOCKS_KEY, None)
    if found is None:
        return _from_timm_note(model)
    return tuple(int(i) for i in found)


def new_block_modules(model: nn.Module) -> list[nn.Module]:
    """The recorded new blocks of ``model`` as modules, input to output (``[]`` when it was not grown); what the
    diagnostics mark as new (:class:`~layerscale.diagnostics.DiagnosticsCallback`). ``ValueError`` when an index is
    past the model's depth."""
    root = getattr(model, "module", model)
    indices = new_block_indices(root)
    return _blocks_at(root, sorted(indices)) if indices else []


def _blocks_at(root: nn.Module, indices) -> list[nn.Module]:
    """The blocks of ``root`` at ``indices`` (0-based in its block stack); ``ValueError`` for one past its depth."""
    blocks = block_family(root).blocks(root)
    bad = [i for i in indices if not 0 <= i < len(blocks)]
    if bad:
        raise ValueError(f"new block index {bad[0]} is past the model's {len(blocks)} blocks")
    return [blocks[i] for i in indices]


def read_new_blocks(folder: str | os.PathLike) -> tuple[int, ...] | None:
    """The ``layerscale_new_blocks`` of ``folder/config.json`` (a model written by ``layerscale grow``), or
    ``None`` when there is no such file or key. The file is read as the sources read it
    (:mod:`layerscale.untrusted_files`: no link, at most ``MAX_CONFIG_BYTES``, nesting bounded): one-line
    ``ValueError`` naming it when it is refused or not JSON."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return None
    config = parse_json(read_regular_file(path, MAX_CONFIG_BYTES), str(path), expected=object, finite=False)
    found = config.get(NEW_BLOCKS_KEY) if isinstance(config, dict) else None
    if found is None:
        return None
    if not (isinstance(found, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in found)):
        raise ValueError(f"{path}: {NEW_BLOCKS_KEY} must be a list of block indices, got {found!r}")
    return tuple(found)


def freeze_all_but_new_blocks(model: nn.Module, indices: tuple[int, ...] | None = None) -> list[str]:
    """Set ``requires_grad=False`` on every parameter outside the new blocks (``indices``, default the model's
    record); returns the names of the parameters left trainable. ``ValueError`` when the model records no new
    blocks, or an index is past its depth."""
    root = getattr(model, "module", model)
    indices = new_block_indices(root) if indices is None else tuple(indices)
    if not indices:
        raise ValueError(f"{type(root).__name__} records no new blocks (key {NEW_BLOCKS_KEY}); train only new "
                         f"blocks of a model written by layerscale grow")
    keep = {id(p) for block in _blocks_at(root, indices) for p in block.parameters()}
    trainable = []
    for name, param in root.named_parameters():
        param.requires_grad_(id(param) in keep)
        if id(param) in keep:
            trainable.append(name)
    return trainable
