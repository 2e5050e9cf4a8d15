"""A Hugging Face tokenizer from a folder, or the byte "tokenizer" of the library's byte-level language models.

A folder with ``tokenizer.json`` (what every fast tokenizer's ``save_pretrained`` writes, and what the
``tokenizers`` library's ``Tokenizer.save`` writes) is read with ``tokenizers.Tokenizer.from_str`` on its bytes,
read as hostile input (:mod:`layerscale.untrusted_files`: no link followed, size bounded); a folder with only
slow-tokenizer files is read with ``transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True,
trust_remote_code=False)`` after the same checks on every entry (no link, every file's size bounded). Text is
encoded without special tokens: the corpus is one stream cut into windows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..untrusted_files import read_regular_file, regular_files

__all__ = ["TextTokenizer", "load_tokenizer", "byte_tokenizer", "MAX_TOKENIZER_BYTES"]

MAX_TOKENIZER_BYTES = 256 << 20


@dataclass(frozen=True)
class TextTokenizer:
    """``encode(text) -> list of ids``; ``vocab_size`` counts every id it can produce (added tokens included);
    ``name`` says where it came from."""

    encode: Callable[[str], list[int]]
    vocab_size: int
    name: str


def byte_tokenizer() -> TextTokenizer:
    """UTF-8 bytes as ids 0…255, the vocabulary of the library's byte-level GPT models."""
    return TextTokenizer(lambda text: list(text.encode("utf-8")), 256, "bytes")


def load_tokenizer(folder: str | os.PathLike) -> TextTokenizer:
    """The tokenizer saved in ``folder`` (module docstring); one-line ``ValueError`` when there is none."""
    folder = Path(folder)
    if not folder.is_dir() or folder.is_symlink():
        raise ValueError(f"{folder}: --tokenizer must be a tokenizer folder (tokenizer.json, or a Hugging Face "
                         "tokenizer's files), not a link or a file")
    files, other = regular_files(folder)
    links = [name for name in other if (folder / name).is_symlink()]
    if links:
        raise ValueError(f"{folder / links[0]}: refused (a symbolic link inside the tokenizer folder); links are not "
                         "followed")
    entries = set(files)
    if "tokenizer.json" in entries:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ImportError("reading tokenizer.json needs the tokenizers library: pip install tokenizers") from None
        data = read_regular_file(folder / "tokenizer.json", MAX_TOKENIZER_BYTES)
        try:
            tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as exc:  # the library's own parse error: one line
            raise ValueError(f"{folder / 'tokenizer.json'}: not a tokenizer ({' '.join(str(exc).split())[:200]})") \
                from None
        return _with_vocabulary(TextTokenizer(lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
                                              tokenizer.get_vocab_size(with_added_tokens=True), str(folder)))
    if not entries & {"tokenizer_config.json", "tokenizer.model", "vocab.json"}:
        raise ValueError(f"{folder}: no tokenizer files (tokenizer.json, tokenizer_config.json, tokenizer.model); "
                         "give --tokenizer a folder written by a tokenizer's save_pretrained")
    for name in files:  # transformers reads them itself: their sizes are bounded here first
        size = (folder / name).stat().st_size
        if size > MAX_TOKENIZER_BYTES:
            raise ValueError(f"{folder / name}: refused ({size} bytes); expected at most {MAX_TOKENIZER_BYTES} bytes")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ImportError("reading a slow tokenizer needs transformers: pip install 'torch-layerscale[hf]'") from None
    try:
        slow = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as exc:
        raise ValueError(f"{folder}: cannot read the tokenizer ({' '.join(str(exc).split())[:200]})") from None
    return _with_vocabulary(TextTokenizer(lambda text: slow.encode(text, add_special_tokens=False), len(slow),
                                          str(folder)))


#: text every tokenizer with a vocabulary turns into at least one id (an unknown-token id at worst)
_PROBE_TEXT = "The quick brown fox jumps over the lazy dog."


def _with_vocabulary(tokenizer: TextTokenizer) -> TextTokenizer:
    """``tokenizer`` when it has a vocabulary: at least two ids, and :data:`_PROBE_TEXT` encodes to some. A folder
    whose ``tokenizer_config.json`` names a class but holds no vocabulary file loads in transformers as a tokenizer
    of one id that encodes every text to nothing; refused here in one line naming the folder, rather than later as
    data that gives no windows."""
    if tokenizer.vocab_size < 2 or not tokenizer.encode(_PROBE_TEXT):
        raise ValueError(f"{tokenizer.name}: the tokenizer has no vocabulary ({tokenizer.vocab_size} id(s); "
                         f"{_PROBE_TEXT!r} encodes to no tokens); expected a folder written by a tokenizer's "
                         "save_pretrained, vocabulary files included")
    return tokenizer
