"""Byte-level text for the GPT model: every byte is a token, so the vocabulary is 256 and needs no tokenizer."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from torch.utils.data import Dataset

from ..machine import machine_memory_bytes
from ..paths import refuse_non_file
from ..untrusted_files import folder_files, read_regular_file
from .bundle import TextDataBundle

BYTE_VOCAB_SIZE = 256
FILE_SEPARATOR = b"\n"


class ByteWindowDataset(Dataset):
    """Non-overlapping windows over a 1-D uint8 token tensor.

    Item `i` is `(x, y)`, int64 tensors of length `block_size`, with
    `x = tokens[i*block_size : (i+1)*block_size]` and `y` the same window shifted right by one token.
    `len` is `(len(tokens) - 1) // block_size`; the tail that does not fill a window is unused.
    """

    def __init__(self, tokens: torch.Tensor, block_size: int) -> None:
        if tokens.dim() != 1:
            raise ValueError(f"tokens must be 1-D, got shape {tuple(tokens.shape)}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if tokens.numel() < block_size + 1:
            raise ValueError(f"{tokens.numel()} tokens, need at least block_size + 1 = {block_size + 1}")
        self.tokens = tokens
        self.block_size = block_size

    def __len__(self) -> int:
        return (self.tokens.numel() - 1) // self.block_size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} windows")
        start = (index % len(self)) * self.block_size
        chunk = self.tokens[start : start + self.block_size + 1].to(torch.int64)
        return chunk[:-1], chunk[1:]


def _memory_limit() -> int:
    """The most corpus bytes read: this machine's memory (a corpus larger than it cannot be held anyway)."""
    memory = machine_memory_bytes()
    return memory if memory is not None else sys.maxsize


def _check_total(where: Path, sizes: list[int], limit: int) -> None:
    total = sum(sizes)
    if total > limit:
        raise ValueError(f"{where}: {len(sizes)} text file(s) of {total} bytes in all; expected at most this "
                         f"machine's memory, {limit} bytes")


def read_text_bytes(path: str | Path) -> bytes:
    """The bytes of `path`: a file as is; every non-hidden file under a folder, recursively, in sorted
    relative-path order; or every file matching a glob pattern (`/usr/share/vim/vim90/doc/*.txt`) in sorted path
    order — joined with one `\\n` byte. Raises FileNotFoundError if `path` does not exist (a pattern: matches no
    file). A folder is read as made by someone else: a symbolic link or special file inside it is refused (one-line
    ``ValueError`` naming it), as is a corpus larger than this machine's memory (before anything is read); a named
    path that is a FIFO or a device is refused by name, never opened."""
    path = Path(path)
    limit = _memory_limit()
    if not path.is_dir():
        refuse_non_file(path, "a text file, a folder or a glob pattern")
    if path.is_file():
        _check_total(path, [path.stat().st_size], limit)
        return path.read_bytes()
    if not path.is_dir() and any(c in str(path) for c in "*?["):
        matches = sorted((p for p in Path(path.anchor or ".").glob(str(path.relative_to(path.anchor))
                                                                     if path.is_absolute() else str(path))
                          if p.is_file()), key=lambda p: p.as_posix())
        if not matches:
            raise FileNotFoundError(f"{path}: no text file matches this pattern")
        _check_total(path, [p.stat().st_size for p in matches], limit)
        return FILE_SEPARATOR.join(p.read_bytes() for p in matches)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: text file or folder not found")
    # the folder the user named may be a link to it; what is inside it is someone else's
    files = folder_files(path.resolve() if path.is_symlink() else path, "text folder")
    _check_total(path, [os.lstat(p).st_size for _, p in files], limit)
    parts, left = [], limit
    for _, file in files:  # each read bounded by what is left: a file grown since is refused (UntrustedFileError)
        parts.append(read_regular_file(file, left))
        left -= len(parts[-1])
    return FILE_SEPARATOR.join(parts)


def load_text(path: str | Path, block_size: int, val_fraction: float = 0.1) -> TextDataBundle:
    """Load a byte-level corpus from a file or folder (see `read_text_bytes`) for next-byte prediction.

    The last `round(n * val_fraction)` bytes are validation, the rest training (split by position, so
    no window straddles the two). Both parts are `ByteWindowDataset`s of `block_size`; with
    `val_fraction=0` there is no validation set. Raises ValueError naming the path and the sizes if
    either part has fewer than `block_size + 1` bytes (including an empty file or folder).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    data = read_text_bytes(path)
    n = len(data)
    n_val = int(round(n * val_fraction))
    n_train = n - n_val
    need = block_size + 1
    if n_train < need or (val_fraction > 0 and n_val < need):
        raise ValueError(
            f"{path}: {n} bytes of text give {n_train} train / {n_val} val bytes with val_fraction={val_fraction}; "
            f"each part needs at least block_size + 1 = {need}"
        )
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)
    return TextDataBundle(
        train=ByteWindowDataset(tokens[:n_train], block_size),
        val=ByteWindowDataset(tokens[n_train:], block_size) if val_fraction > 0 else None,
        vocab_size=BYTE_VOCAB_SIZE,
        block_size=block_size,
        num_train_tokens=n_train,
        num_val_tokens=n_val,
        source=str(path),
    )
