"""Calibration and evaluation text from a user's file: plain UTF-8 text, or JSON Lines with one text field per line.

The file is read as hostile input (:func:`layerscale.untrusted_files.read_regular_file`: no link followed, at most
:data:`MAX_CORPUS_BYTES` bytes, regular files only). Refused in one line: a file that is empty or holds only
whitespace, one that is binary (a NUL byte, or bytes that are not UTF-8), a JSONL line that is not a JSON object
or lacks the text field (or holds a non-string there), or that Python's JSON reader cannot hold: nested deeper than
it recurses, or an integer literal past Python's int-string limit (each refusal names the file and the line number).
JSONL documents are joined with ``"\\n\\n"``, the joining the usual perplexity evaluations of language models use
(the Hugging Face perplexity guide and the WikiText-2 evaluations of the pruning papers tokenize
``"\\n\\n".join(texts)`` once).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..untrusted_files import parse_json, read_regular_file

__all__ = ["read_corpus", "MAX_CORPUS_BYTES", "DOCUMENT_SEPARATOR"]

#: The largest data file read (256 MiB: far more text than calibration or evaluation windows need).
MAX_CORPUS_BYTES = 256 << 20
DOCUMENT_SEPARATOR = "\n\n"
#: How deep a JSON Lines record may nest (its metadata beside the text field; Python's reader recurses about 1,000)
_MAX_RECORD_DEPTH = 256


def _decode(path: Path, data: bytes) -> str:
    if b"\x00" in data:
        raise ValueError(f"{path}: --data-path holds NUL bytes; it is binary, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: --data-path is not UTF-8 text (byte {exc.start}); binary data is refused") from None


def _jsonl(path: Path, text: str, field: str) -> str:
    documents = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        # Python's reader limits, named by file and line (untrusted_files.parse_json); NaN kept, nesting as deep
        # as a document may hold
        record = parse_json(line, f"{path}: line {number}", expected=object, max_depth=_MAX_RECORD_DEPTH,
                            finite=False)
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {number} holds a {type(record).__name__}, expected a JSON object")
        if field not in record:
            raise ValueError(f"{path}: line {number} has no field {field!r} (--text-field); its fields: "
                             f"{', '.join(sorted(map(str, record))[:8]) or 'none'}")
        if not isinstance(record[field], str):
            raise ValueError(f"{path}: line {number}: field {field!r} is a {type(record[field]).__name__}, "
                             "expected a string")
        documents.append(record[field])
    return DOCUMENT_SEPARATOR.join(documents)


def read_corpus(path: str | os.PathLike, text_field: str | None = None, *,
                limit: int = MAX_CORPUS_BYTES) -> str:
    """The text of ``path``: the file itself, or — when ``text_field`` is given or the name ends in ``.jsonl`` —
    the field ``text_field`` (default ``"text"``) of every line, joined with :data:`DOCUMENT_SEPARATOR`. One-line
    ``ValueError`` for the inputs refused (module docstring), a missing file included."""
    path = Path(path)
    text = _decode(path, read_regular_file(path, limit))
    if text_field is not None or path.name.endswith(".jsonl"):
        text = _jsonl(path, text, text_field or "text")
    if not text.strip():
        raise ValueError(f"{path}: --data-path holds no text")
    return text
