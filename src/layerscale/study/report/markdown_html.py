"""The study's ``results.md`` as HTML, for the report: the small Markdown subset the study writes, nothing else.

Supported: ``#`` headings, pipe tables (a header row, a ``|---|---:|`` alignment row, body rows), ``- `` bullet
lists, paragraphs (consecutive lines), and inline ``**bold**`` and ```code```. Every character of the input is
HTML-escaped before any tag is added, so a method name or message can never inject markup; anything outside the
subset is shown as the text it is.
"""

from __future__ import annotations

import html
import re

__all__ = ["markdown_to_html", "split_title"]

_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_ALIGN_CELL = re.compile(r"^:?-{1,}:?$")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def _inline(text: str) -> str:
    escaped = html.escape(text.strip(), quote=True)
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    return _BOLD.sub(r"<strong>\1</strong>", escaped)


def _cells(line: str) -> list[str]:
    """The cells of a pipe-table row; ``\\|`` is a literal bar inside a cell."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _is_alignment_row(line: str) -> bool:
    cells = [c.strip() for c in _cells(line)]
    return bool(cells) and all(_ALIGN_CELL.match(c) for c in cells)


def _table(lines: list[str]) -> str:
    header = _cells(lines[0])
    aligns = []
    body = lines[1:]
    if body and _is_alignment_row(body[0]):
        for cell in (c.strip() for c in _cells(body[0])):
            aligns.append("right" if cell.endswith(":") and not cell.startswith(":") else
                          "center" if cell.startswith(":") and cell.endswith(":") else "left")
        body = body[1:]

    def row(cells: list[str], tag: str) -> str:
        out = []
        for i, cell in enumerate(cells):
            align = aligns[i] if i < len(aligns) else "left"
            style = f' style="text-align:{align}"' if align != "left" else ""
            out.append(f"<{tag}{style}>{_inline(cell)}</{tag}>")
        return "<tr>" + "".join(out) + "</tr>"

    rows = "".join(row(_cells(line), "td") for line in body)
    return f"<table><thead>{row(header, 'th')}</thead><tbody>{rows}</tbody></table>"


def split_title(markdown: str) -> tuple[str | None, str]:
    """``(title, rest)``: the text of a leading ``# `` heading (``None`` when the text starts otherwise) and the
    Markdown after it."""
    lines = markdown.lstrip("\n").splitlines()
    if lines and (match := _HEADING.match(lines[0])) and len(match.group(1)) == 1:
        return match.group(2).strip(), "\n".join(lines[1:])
    return None, markdown


def markdown_to_html(markdown: str, heading_offset: int = 1) -> str:
    """HTML for ``markdown`` (the subset in the module docstring); a heading of level ``n`` becomes
    ``<h{n + heading_offset}>`` (at most ``h6``) so the text nests under the page's own headings."""
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    table: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append("<p>" + " ".join(_inline(line) for line in paragraph) + "</p>")
            paragraph.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + "</ul>")
            items.clear()
        if table:
            out.append(_table(table))
            table.clear()

    for raw in markdown.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        if stripped.startswith("|"):
            if not table:
                flush()
            table.append(stripped)
            continue
        if table:
            flush()
        heading = _HEADING.match(stripped)
        if heading:
            flush()
            level = min(6, len(heading.group(1)) + heading_offset)
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif stripped.startswith(("- ", "* ")):
            if paragraph:
                flush()
            items.append(stripped[2:])
        elif items and raw[:1].isspace():
            items[-1] += " " + stripped  # a wrapped bullet
        else:
            if items:
                flush()
            paragraph.append(stripped)
    flush()
    return "\n".join(out)
