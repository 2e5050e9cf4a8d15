"""The shape of a config tree, checked before any of its values is looked at: plain data, bounded.

A config file (or a ``--set`` value, or a mapping passed from Python) is data from outside. Before validation reads
it, :func:`check_config_tree` walks it once, without recursion, and refuses in one line:

- nesting deeper than :data:`MAX_DEPTH` levels (20,000 nested ``[`` would otherwise end in a ``RecursionError`` in
  whatever recursive code touches the value next: ``repr``, ``deepcopy``, the YAML writer);
- more than :data:`MAX_VALUES` values counted as the tree *expands*: a YAML alias ``*a`` is a reference, so a
  600-byte "billion laughs" file is a tree of billions of values, and every reader that walks it (an error message
  included) would take minutes and gigabytes. The walk stops at the limit, so the check itself costs at most
  :data:`MAX_VALUES` steps;
- a mapping key that is not a string (``1: 2`` in YAML): config keys are names, and mixed key types cannot even be
  sorted for a message;
- in a file (``plain=True``), a value that is not plain data (``None``, ``bool``, ``int``, ``float``, ``str``,
  lists and mappings of them); a mapping built in Python may hold other values, which validation then judges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...messages import shown_name

__all__ = ["MAX_DEPTH", "MAX_VALUES", "check_config_tree"]

#: Levels of nesting a config may have (ours has 3: section, key, list of numbers).
MAX_DEPTH = 32
#: Values a config may hold, aliases expanded (ours has about 60).
MAX_VALUES = 10_000

_SCALARS = (type(None), bool, int, float, str)


def check_config_tree(tree: Any, where: str = "config", *, plain: bool = True) -> None:
    """Raise a one-line ``ValueError`` (prefixed ``where``) if ``tree`` is not a bounded tree with string keys
    (of plain data, with ``plain``); see the module docstring."""
    stack: list[tuple[Any, str, int]] = [(tree, "", 0)]
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ValueError(f"{where}: holds more than {MAX_VALUES:,} values (YAML aliases are counted each time "
                             "they are used); a training config has about 60")
        if depth > MAX_DEPTH:
            raise ValueError(f"{where}: nested more than {MAX_DEPTH} levels deep at {shown_name(path or '<top>')}")
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(f"{where}: key {shown_name(repr(key))} in {shown_name(path or '<top>')} is of "
                                     f"type {type(key).__name__}; config keys are strings")
                stack.append((item, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
        elif plain and not isinstance(value, _SCALARS):
            raise ValueError(f"{where}: {shown_name(path or '<top>')} is of type {type(value).__name__}; a config "
                             "holds numbers, strings, booleans, null, lists and mappings")
