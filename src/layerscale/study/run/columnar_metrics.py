"""A run's ``metrics.jsonl`` stored column-wise in a study archive, and decoded back to the same bytes.

The per-step diagnostics records are most of a run's metric log (94 % of the bytes of a depth-48 Fashion-MNIST
run): one JSON object per logged step, each with the same keys in the same order and a value per block and branch.
Written row by row, the compressor sees one step's 48 unlike numbers between two copies of the keys; written
column by column, it sees one block's statistic step after step, which is what repeats. The packed archive of a
study (:mod:`layerscale.study.run.archive`) therefore stores ``metrics.jsonl`` as :data:`COLUMNS_FILE`, a JSON
document:

``{"format": "layerscale.metrics-columns", "version": 1, "groups": [...], "lines": [...]}``

- ``lines``: one entry per line of the log, in order: a string is the line verbatim; an integer ``k`` is the next
  record of group ``k``.
- each group holds the records (lines whose JSON object has ``"split": "diagnostics"`` and is written exactly as
  ``json.dumps`` writes it) that share one *skeleton*: the record with every leaf (number, string, bool, null)
  replaced by null, keys and list lengths kept. ``constants`` lists one value per leaf, in the order a depth-first
  walk meets them (null where the leaf varies); ``varying`` lists the leaves that differ between the group's
  records; ``columns[j]`` holds leaf ``varying[j]`` of every record of the group, in order.

The contract: :func:`decode_metrics` of :func:`encode_metrics`\\ ``(data)`` is ``data``, byte for byte, which
:func:`encode_metrics` checks before it returns (it returns ``None`` for a log it cannot store that way: not UTF-8,
or with no diagnostics record), so every reader of the unpacked log reads what was packed. A document that is not
one :func:`encode_metrics` could have written is refused with one ``ValueError`` naming it.

A document comes from an archive someone else made, so decoding is bounded before anything is built: it is parsed
by :func:`layerscale.untrusted_files.parse_json` (nesting at most 32 levels; NaN kept as the log wrote it), holds at
most :data:`MAX_LINES` lines, and its decoded size is bounded from the document alone — every line's constant part
(its group's skeleton and constants, which a hostile document can repeat from many lines) is summed before the
first line is written, and the varying parts are at most the document's own size, since each column value is
used once — against :data:`MAX_DECODED_BYTES`.
"""

from __future__ import annotations

import json
from typing import Any

from ...untrusted_files import UntrustedFileError, parse_json

__all__ = ["COLUMNS_FILE", "encode_metrics", "decode_metrics", "MAX_LINES", "MAX_DECODED_BYTES"]

#: a depth-96 language-model run logs a few thousand lines; a million is far past any real run
MAX_LINES = 1_000_000
#: the largest metrics.jsonl a run may decode to (the archive's limit on one member)
MAX_DECODED_BYTES = 256 * 1024 * 1024

COLUMNS_FILE = "metrics.columns.json"
_FORMAT, _VERSION = "layerscale.metrics-columns", 1
_COLUMNAR_SPLIT = "diagnostics"


def _leaves(value: Any, out: list) -> Any:
    """The skeleton of ``value`` (every leaf replaced by ``None``); its leaves appended to ``out`` depth first."""
    if isinstance(value, dict):
        return {key: _leaves(child, out) for key, child in value.items()}
    if isinstance(value, list):
        return [_leaves(child, out) for child in value]
    out.append(value)
    return None


def _filled(skeleton: Any, leaves: Any) -> Any:
    """The inverse of :func:`_leaves`: ``skeleton`` with its leaves taken in order from the iterator ``leaves``."""
    if isinstance(skeleton, dict):
        return {key: _filled(child, leaves) for key, child in skeleton.items()}
    if isinstance(skeleton, list):
        return [_filled(child, leaves) for child in skeleton]
    return next(leaves)


def _columnar_record(line: str) -> dict | None:
    """The record of ``line`` when it goes into a column group: a diagnostics object that ``json.dumps`` writes back
    exactly as ``line`` (so decoding reproduces the line); ``None`` for every other line."""
    if f'"{_COLUMNAR_SPLIT}"' not in line:
        return None
    try:  # bounded: a line Python's reader cannot hold (or deeper than 32 levels) stays a verbatim line
        record = parse_json(line, "a metrics.jsonl line", expected=object, finite=False)
    except UntrustedFileError:
        return None
    if not isinstance(record, dict) or record.get("split") != _COLUMNAR_SPLIT or json.dumps(record) != line:
        return None
    return record


def _group(records: list[list]) -> tuple[list, list[int], list[list]]:
    """``(constants, varying, columns)`` of a group's leaf rows. Leaves compare by their JSON text, so ``1``,
    ``1.0`` and ``true`` are different values."""
    first = records[0]
    constants, varying, columns = list(first), [], []
    for index in range(len(first)):
        column = [row[index] for row in records]
        text = json.dumps(first[index])
        if any(json.dumps(value) != text for value in column[1:]):
            constants[index] = None
            varying.append(index)
            columns.append(column)
    return constants, varying, columns


def encode_metrics(data: bytes) -> bytes | None:
    """The columnar document (see the module docstring) of the ``metrics.jsonl`` content ``data``; ``None`` when
    ``data`` is not UTF-8, holds no diagnostics record, or would not decode back to itself."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    skeletons: dict[str, int] = {}
    groups: list[tuple[Any, list[list]]] = []
    lines: list[str | int] = []
    for line in text.split("\n"):
        record = _columnar_record(line)
        if record is None:
            lines.append(line)
            continue
        leaves: list = []
        skeleton = _leaves(record, leaves)
        key = json.dumps(skeleton)
        if key not in skeletons:
            skeletons[key] = len(groups)
            groups.append((skeleton, []))
        groups[skeletons[key]][1].append(leaves)
        lines.append(skeletons[key])
    if not groups:
        return None
    encoded_groups = []
    for skeleton, rows in groups:
        constants, varying, columns = _group(rows)
        encoded_groups.append({"skeleton": skeleton, "constants": constants, "varying": varying, "columns": columns})
    document = json.dumps({"format": _FORMAT, "version": _VERSION, "groups": encoded_groups, "lines": lines},
                          separators=(",", ":")).encode("utf-8")
    return document if decode_metrics(document, "the columnar log just written") == data else None


def _constant_size(skeleton: Any, constants: list, varying: list) -> int:
    """Bytes of one decoded record of a group, its varying leaves counted as ``null``."""
    leaves = list(constants)
    for index in varying:
        leaves[index] = None
    return len(json.dumps(_filled(skeleton, iter(leaves))))


def _check_size(document: dict, groups: list, budget: int) -> None:
    """``ValueError`` when the document would decode to more than ``MAX_DECODED_BYTES`` or ``MAX_LINES`` lines
    (see the module docstring), computed without building a line."""
    lines = document["lines"]
    if len(lines) > MAX_LINES:
        raise ValueError(f"{len(lines)} lines; at most {MAX_LINES}")
    sizes = [_constant_size(skeleton, constants, varying) for skeleton, constants, varying, _ in groups]
    total = budget
    for entry in lines:
        if isinstance(entry, str):
            total += len(entry) + 1
        elif isinstance(entry, int) and not isinstance(entry, bool) and 0 <= entry < len(sizes):
            total += sizes[entry] + 1
        if total > MAX_DECODED_BYTES:
            raise ValueError(f"decodes to more than {MAX_DECODED_BYTES} bytes; at most {MAX_DECODED_BYTES}")


def _decoded_lines(document: dict, budget: int = 0) -> list[str]:
    if document.get("format") != _FORMAT or document.get("version") != _VERSION:
        raise ValueError(f"format {document.get('format')!r} version {document.get('version')!r}, expected "
                         f"{_FORMAT!r} version {_VERSION}")
    if not isinstance(document["lines"], list) or not isinstance(document["groups"], list):
        raise ValueError("'lines' and 'groups' must be lists")
    groups = []
    for k, group in enumerate(document["groups"]):
        constants, varying, columns = group["constants"], group["varying"], group["columns"]
        if not all(isinstance(part, list) for part in (constants, varying, columns, *columns)):
            raise ValueError(f"group {k}: constants, varying and columns must be lists (columns of lists)")
        lengths = {len(column) for column in columns}
        if len(varying) != len(columns) or len(lengths) > 1 or not all(0 <= i < len(constants) for i in varying):
            raise ValueError(f"group {k}: {len(varying)} varying leaves, {len(columns)} columns of lengths "
                             f"{sorted(lengths)}, {len(constants)} leaves; expected one column per varying leaf, "
                             "all of one length")
        skeleton_leaves: list = []
        _leaves(group["skeleton"], skeleton_leaves)
        if len(skeleton_leaves) != len(constants) or any(leaf is not None for leaf in skeleton_leaves):
            raise ValueError(f"group {k}: a skeleton of {len(skeleton_leaves)} leaves for {len(constants)} "
                             "constants; expected one constant per null leaf")
        groups.append((group["skeleton"], constants, varying, columns))
    _check_size(document, groups, budget)
    used = [0] * len(groups)
    out = []
    for entry in document["lines"]:
        if isinstance(entry, str):
            out.append(entry)
            continue
        if isinstance(entry, bool) or not isinstance(entry, int) or not 0 <= entry < len(groups):
            raise ValueError(f"line entry {entry!r} is neither a line nor a group index below {len(groups)}")
        skeleton, constants, varying, columns = groups[entry]
        row, leaves = used[entry], list(constants)
        for index, column in zip(varying, columns):
            leaves[index] = column[row]
        used[entry] += 1
        out.append(json.dumps(_filled(skeleton, iter(leaves))))
    for k, (*_, columns) in enumerate(groups):
        rows = len(columns[0]) if columns else used[k]
        if used[k] != rows:
            raise ValueError(f"group {k} holds {rows} records, the lines use {used[k]}")
    return out


def decode_metrics(document: bytes, where: str) -> bytes:
    """The ``metrics.jsonl`` content that :func:`encode_metrics` stored as ``document``. ``ValueError`` naming
    ``where`` when ``document`` is not such a document (damaged, another format, inconsistent columns)."""
    try:
        parsed = parse_json(document, "the document", finite=False)  # the log may hold NaN as written
        lines = _decoded_lines(parsed, budget=len(document))
    except UntrustedFileError as exc:
        raise ValueError(f"{where}: not a columnar metrics log ({exc})") from None
    except (ValueError, KeyError, IndexError, TypeError, StopIteration, AttributeError, RecursionError) as exc:
        raise ValueError(f"{where}: not a columnar metrics log ({exc.__class__.__name__}: {exc})") from None
    return "\n".join(lines).encode("utf-8")
