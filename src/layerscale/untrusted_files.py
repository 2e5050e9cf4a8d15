"""Reading a folder someone else made: no link followed, no special file opened, every size bounded first.

A study folder shared by a colleague, a run folder to reuse, a model folder downloaded from anywhere: any file in
it may be a symbolic link (to ``/dev/zero``, to ``~/.ssh/id_rsa``), a FIFO that blocks the reader forever, or a
regular file far larger than anything the reader expects. The functions here are the one place such folders are
read from:

- :func:`read_regular_file` opens with ``O_NOFOLLOW | O_NONBLOCK`` (a link is refused by the kernel, a FIFO does
  not block), checks with ``fstat`` on the opened descriptor that it is a regular file (no race between a check
  and the open), refuses one larger than ``limit`` bytes before reading, and reads at most ``limit`` bytes;
- :func:`read_text_file` is :func:`read_regular_file` of a text file: UTF-8, or refused naming the file;
- :func:`regular_files` lists the regular files directly inside a folder that is itself no link, naming what it
  passed over (links, folders, special files) so the caller can say so;
- :func:`parse_json` parses bytes (or text) as JSON of at most :data:`MAX_JSON_DEPTH` levels and checks the
  top-level type, turning every failure (bad UTF-8, syntax, nesting deeper than Python's reader recurses or than the
  limit, an integer literal past Python's int-string limit, ``1e400`` → ``inf``) into one
  :class:`UntrustedFileError`.

Every refusal is an :class:`UntrustedFileError` (a ``ValueError``) whose message is one line naming the path and
what was expected. Two kinds are subclasses a caller may treat apart: :class:`NotJSONError` (not JSON text at all:
bad syntax, cut short, not UTF-8 — what a record being written looks like when read half-way) and
:class:`JSONTooDeepError` (nested deeper than allowed).
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

__all__ = ["UntrustedFileError", "NotJSONError", "JSONTooDeepError", "read_regular_file", "read_text_file",
           "regular_files", "visible_entries", "folder_files", "parse_json", "read_json_file",
           "MAX_CONFIG_BYTES", "MAX_JSON_DEPTH", "MAX_RECORD_BYTES"]

#: the deepest JSON nesting any record of ours has is 6 (a study.json's base config); 32 leaves room to grow
MAX_JSON_DEPTH = 32
#: the largest JSON record (study.json, plan.json, tuning.json, a run's summary) read whole
MAX_RECORD_BYTES = 64 * 1024 * 1024
#: A model folder's ``config.json`` larger than this is refused (real ones are a few kB).
MAX_CONFIG_BYTES = 8 << 20


class UntrustedFileError(ValueError):
    """A file or folder from outside was refused; the message names it and what was expected."""


class NotJSONError(UntrustedFileError):
    """:func:`parse_json` was given what is not JSON text (bad syntax, cut short, not UTF-8)."""


class JSONTooDeepError(UntrustedFileError):
    """:func:`parse_json` was given JSON nested deeper than its ``max_depth`` (or than Python's reader recurses)."""


def read_regular_file(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of ``path``, which must be a regular file (not a link, FIFO, device or folder) of at most
    ``limit`` bytes; :class:`UntrustedFileError` otherwise (also when it does not exist or cannot be read)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        kind = "a symbolic link" if path.is_symlink() else (exc.strerror or type(exc).__name__).lower()
        raise UntrustedFileError(f"{path}: refused ({kind}); expected a regular file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedFileError(f"{path}: refused (not a regular file); expected a regular file")
        if info.st_size > limit:
            raise UntrustedFileError(f"{path}: refused ({info.st_size} bytes); expected at most {limit} bytes")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while being read
            raise UntrustedFileError(f"{path}: refused (more than {limit} bytes); expected at most {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise UntrustedFileError(f"{path}: unreadable ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_text_file(path: str | os.PathLike, limit: int, expected: str) -> str:
    """The text of ``path``: :func:`read_regular_file` (``limit`` bytes at most) decoded as UTF-8;
    :class:`UntrustedFileError` naming the path and ``expected`` (what the file should be) for bytes that are not
    UTF-8 text."""
    data = read_regular_file(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UntrustedFileError(f"{path}: not UTF-8 text (byte {exc.start}); expected {expected}") from None


def regular_files(folder: str | os.PathLike) -> tuple[list[str], list[str]]:
    """``(files, passed_over)``: the names of the regular files directly in ``folder`` (sorted), and of every other
    entry (links, folders, special files). :class:`UntrustedFileError` when ``folder`` is a link or no folder."""
    folder = Path(folder)
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise UntrustedFileError(f"{folder}: refused ({(exc.strerror or str(exc)).lower()}); expected a folder") \
            from None
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        raise UntrustedFileError(f"{folder}: refused ({kind}); expected a folder")
    files, other = [], []
    with os.scandir(folder) as entries:
        for entry in entries:
            (files if entry.is_file(follow_symlinks=False) else other).append(entry.name)
    return sorted(files), sorted(other)


def visible_entries(directory: Path, what: str, within: Path | None = None,
                    expected: str = "regular files and folders only") -> tuple[list[str], list[Path]]:
    """``(names, folders)``: the non-hidden regular files directly in ``directory`` (sorted names) and its
    non-hidden sub-folders (sorted paths); hidden entries (a name starting with ``.``) are passed over. A symbolic
    link or a special file (a FIFO, a device, a socket) is refused in one line naming it, ``what`` the folder
    ``within`` (default ``directory``) is, and what was ``expected`` there: never followed or opened."""
    from .messages import shown_name
    from .paths import describe_non_file

    files, others = regular_files(directory)
    folders = []
    for name in others:
        if name.startswith("."):
            continue
        entry = directory / name
        mode = os.lstat(entry).st_mode
        if not stat.S_ISDIR(mode):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else describe_non_file(entry) or "no regular file"
            raise ValueError(f"{shown_name(str(entry))}: is {kind} inside the {what} "
                             f"{shown_name(str(within or directory))}; expected {expected}")
        folders.append(entry)
    return [name for name in files if not name.startswith(".")], folders


def folder_files(folder: Path, what: str) -> list[tuple[str, Path]]:
    """``(relative path, path)`` of every non-hidden regular file under ``folder``, recursively, sorted by relative
    path (stable across filesystems). Hidden entries (a name starting with ``.``: ``.ipynb_checkpoints/``,
    ``.git/``, macOS's ``._x.png``) are passed over with everything under them. A symbolic link or a special file (a
    FIFO, a device, a socket) is refused in one line naming it and ``what`` the folder is (``"text folder"``),
    never followed or opened (:func:`visible_entries`)."""
    found, stack = [], [(folder, "")]
    while stack:
        directory, prefix = stack.pop()
        files, folders = visible_entries(directory, what, folder)
        found += [(prefix + name, directory / name) for name in files]
        stack += [(sub, f"{prefix}{sub.name}/") for sub in folders]
    return sorted(found)


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, iteratively (no recursion on hostile input), stopping past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


class _NotFinite(ValueError):
    """``NaN``, ``Infinity`` or a number overflowing to ``inf``, refused by ``parse_json(..., finite=True)``."""


def _finite_constant(name: str) -> float:
    raise _NotFinite(f"{name} is not a JSON number")


def parse_json(data: bytes | str, where: str, expected: type = dict, max_depth: int = MAX_JSON_DEPTH,
               finite: bool = True) -> Any:
    """``data`` (bytes, UTF-8, or text) parsed as JSON nested at most ``max_depth`` levels, whose top level is an
    instance of ``expected`` (``object``: any); with ``finite`` (the default) strict JSON: no ``NaN``/``Infinity``
    and no number that overflows to ``inf`` (``finite=False`` keeps them, for a document that stores such values as
    they were written). :class:`UntrustedFileError` naming ``where`` otherwise, one line: :class:`NotJSONError` for
    what is no JSON text, :class:`JSONTooDeepError` for nesting past ``max_depth`` or past what Python's reader
    recurses (its ``RecursionError``), and a refusal naming the int-string limit for an integer literal longer than
    Python converts (its ``ValueError``, whose advice, ``sys.set_int_max_str_digits``, is no fix for a file)."""
    too_deep = f"{where}: refused (nested too deep); expected at most {max_depth} levels"
    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
        value = json.loads(text, **({"parse_constant": _finite_constant, "parse_float": _finite_float}
                                    if finite else {}))
    except RecursionError:
        raise JSONTooDeepError(too_deep) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotJSONError(f"{where}: not valid JSON ({str(exc).splitlines()[0]})") from None
    except _NotFinite as exc:
        raise UntrustedFileError(f"{where}: not valid JSON ({str(exc).splitlines()[0]})") from None
    except ValueError as exc:  # an integer literal longer than sys.get_int_max_str_digits() digits
        if "integer string conversion" not in str(exc):
            raise UntrustedFileError(f"{where}: not valid JSON ({str(exc).splitlines()[0]})") from None
        raise UntrustedFileError(f"{where}: refused (an integer of more than {sys.get_int_max_str_digits()} digits, "
                                 "past the int-string limit of Python's JSON reader); expected numbers of ordinary "
                                 "size") from None
    if _depth(value, max_depth) > max_depth:
        raise JSONTooDeepError(too_deep)
    if not isinstance(value, expected):
        raise UntrustedFileError(f"{where}: refused (a JSON {type(value).__name__}); expected a JSON "
                                 f"{'object' if expected is dict else expected.__name__}")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"the number {text[:40]} overflows a float")
    return value


def read_json_file(path: str | os.PathLike, expected: type = dict, limit: int = MAX_RECORD_BYTES, *,
                   finite: bool = True) -> Any:
    """:func:`parse_json` of :func:`read_regular_file`: a JSON record read as a hostile file (``finite`` as there).
    ``FileNotFoundError`` when nothing is there (a link that leads nowhere counts as there: it is refused)."""
    path = Path(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: not found")
    return parse_json(read_regular_file(path, limit), str(path), expected, finite=finite)
