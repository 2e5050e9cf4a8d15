"""The fields of a study file (``study.json``) and the JSON type each must hold, checked before the design reads them.

A study folder may come from anyone. A field of the wrong type would otherwise end in a Python error that names
nothing (``"methods": 5`` → ``'int' object is not iterable``), or be read as something else (``"methods":
"prenorm"`` as seven one-letter methods, ``"shared_table": "no"`` as true). :func:`check_spec_fields` refuses such
a field in one line naming the field, its value and the type expected; the caller names the file. Only types are
checked here: the values themselves (known methods, ranges, one rate per cell) are judged by
:class:`~layerscale.study.design.grid.StudySpec` as for a design given on the command line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...messages import shown_value

__all__ = ["FIELDS", "REQUIRED_FIELDS", "check_spec_fields"]


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _mapping(value: Any) -> bool:
    return isinstance(value, dict)


def _or_null(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or test(value)


def _list_of(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, list) and all(test(item) for item in value)


def _rows(*tests: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return _list_of(lambda row: isinstance(row, list) and len(row) == len(tests)
                    and all(test(item) for test, item in zip(tests, row)))


_JSON_TYPES = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object",
               type(None): "null"}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


#: field -> (the type expected, in words; its test). Every key :meth:`StudySpec.to_dict` writes, and ``executor``
#: (:mod:`layerscale.study.run.executors.options`).
FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "methods": ("a list of method names (strings)", _list_of(_string)),
    "depths": ("a list of integers", _list_of(_integer)),
    "seeds": ("a list of integers", _list_of(_integer)),
    "lrs": ("a list of numbers", _list_of(_number)),
    "reference": ("a method name (string) or null", _or_null(_string)),
    "validation_fraction": ("a number", _number),
    "tune_seed": ("an integer", _integer),
    "min_budget": ("a number", _number),
    "halving_rate": ("an integer", _integer),
    "patience": ("an integer", _integer),
    "min_delta": ("a number", _number),
    "target": ("a number or null", _or_null(_number)),
    "shared_table": ("true or false", _boolean),
    "shapes": ("a list of [method, depth, width] rows (string, integer, integer)", _rows(_string, _integer, _integer)),
    "tuning": ("a string", _string),
    "tune_seeds": ("an integer", _integer),
    "extend_grid": ("an integer", _integer),
    "primary": ("a list of strings", _list_of(_string)),
    "bootstrap": ("an integer", _integer),
    "primary_seeds": ("an integer", _integer),
    "primary_declared": ("true or false", _boolean),
    "fixed_rates": ("a list of [method, depth, lr] rows (string, integer, number)", _rows(_string, _integer, _number)),
    "exploratory_only": ("true or false", _boolean),
    "base": ("a mapping of training config sections (a JSON object)", _mapping),
    "executor": ("a mapping of executor options (a JSON object) or null", _or_null(_mapping)),
}
#: the fields a study file cannot do without (every other one has a default)
REQUIRED_FIELDS = ("methods", "depths", "seeds")


def check_spec_fields(raw: Any, fields: Iterable[str] = tuple(FIELDS)) -> None:
    """A one-line ``ValueError`` for the first of ``fields`` that ``raw``, a study file's content, holds with the
    wrong type (``field 'methods': expected a list of method names (strings), got 5 (a JSON number)``), or for a
    missing :data:`REQUIRED_FIELDS` one. Fields not in :data:`FIELDS` are left to the reader."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object of design fields, got {shown_value(raw)} "
                         f"(a JSON {_json_type(raw)})")
    for key in fields:
        expected, test = FIELDS[key]
        if key not in raw:
            if key in REQUIRED_FIELDS:
                raise ValueError(f"field {key!r} is missing; expected {expected}")
            continue
        if not test(raw[key]):
            raise ValueError(f"field {key!r}: expected {expected}, got {shown_value(raw[key])} "
                             f"(a JSON {_json_type(raw[key])})")
