"""Text from outside (tensor names, config values, paths) made safe to put in a one-line message.

The contract every error message relies on: a name or value shown to the user is escaped and capped, so that a
crafted checkpoint or config cannot forge a second error line (a newline in a tensor name), drive the terminal (an
ANSI escape sequence), or turn one line into megabytes (a 200 KB name, a YAML alias bomb).

- :func:`shown_name` escapes every character that is not printable (``\\n``, ``\\x1b``, ``\\u2028`` ...) and
  keeps at most ``limit`` characters, then gives the full length.
- :func:`shown_names` is a short list of names, ``[a, b, c] (+N more)``.
- :func:`shown_value` is a bounded ``repr``: containers are cut after a few items and a few levels
  (:class:`reprlib.Repr`), so even a value whose full ``repr`` would take gigabytes costs microseconds.
- :func:`one_line` is the last guard of the command line: the whole message, escaped and capped.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["MESSAGE_LIMIT", "NAME_LIMIT", "one_line", "shown_name", "shown_names", "shown_value"]

#: Characters of one name (or one value) in a message.
NAME_LIMIT = 120
#: Characters of a whole message on the command line.
MESSAGE_LIMIT = 2000


def _escape(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def shown_name(name: Any, limit: int = NAME_LIMIT) -> str:
    """``name`` (a ``str``, else its ``str()``) with non-printable characters escaped (``\\n``, ``\\x1b``), cut to
    ``limit`` characters and then marked with its full length. Only the first ``limit`` characters are escaped, so a
    200 KB name costs no more than a short one."""
    text = name if isinstance(name, str) else str(name)
    escaped = _escape(text[:limit])
    if len(text) <= limit and len(escaped) <= limit:
        return escaped
    return f"{escaped[:limit]}...({len(text)} characters)"


def shown_names(names: Any, limit: int = 10) -> str:
    """``[a, b, c] (+N more)``: the first ``limit`` of ``names`` (sorted), each through :func:`shown_name`."""
    names = sorted(names, key=str)
    shown = ", ".join(shown_name(name) for name in names[:limit])
    return f"[{shown}]" + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 6, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = NAME_LIMIT, NAME_LIMIT, 40


def shown_value(value: Any, limit: int = NAME_LIMIT) -> str:
    """A bounded ``repr`` of ``value`` (a few items per container, a few levels deep, long strings and numbers
    cut), escaped and at most ``limit`` characters."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 — a value whose own __repr__ fails is still shown, by its type
        text = f"<{type(value).__name__}>"
    return shown_name(text, limit)


def one_line(message: Any, limit: int = MESSAGE_LIMIT) -> str:
    """``message`` as one line: non-printable characters (newlines included) escaped, at most ``limit``
    characters."""
    return shown_name(message, limit)
