"""Small CSV tables of the evidence reports (docs/results/<evidence>/*.csv): read as rows of strings, written
as text with ``None`` as an empty field, in a fixed column order and ``\\n`` line ends (so a rebuild is
byte-identical)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

__all__ = ["read_rows", "csv_text"]


def read_rows(path: str | Path) -> list[dict]:
    """The rows of ``path`` as ``{column: text}``; ``[]`` when the file does not exist yet."""
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def csv_text(rows: list[dict], fields: list[str]) -> str:
    """``rows`` as CSV text with the columns ``fields`` (a missing key or ``None`` is an empty field; a float
    is written as its ``repr``, so it reads back exactly)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else (repr(row[k]) if isinstance(row[k], float) else row[k])
                         for k in fields})
    return buffer.getvalue()
