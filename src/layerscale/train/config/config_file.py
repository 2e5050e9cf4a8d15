"""Config files (YAML or JSON) and ``--set section.key=value`` overrides, turned into the plain dict that
:meth:`layerscale.train.config.schema.TrainConfig.from_dict` validates.

YAML needs pyyaml (extra ``train``). JSON needs nothing, and since JSON is YAML, a run directory's ``config.yaml``
is written as JSON when pyyaml is absent, so it stays readable both ways.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from ...messages import shown_name
from ...paths import describe_non_file
from ...untrusted_files import JSONTooDeepError, NotJSONError, parse_json
from .config_tree import MAX_DEPTH, check_config_tree

__all__ = ["apply_overrides", "dotted_items", "dump_config", "load_config_file", "parse_config_text", "parse_scalar",
           "read_config_text"]

_EXTRA_HINT = "pip install 'torch-layerscale[train]'"
#: the nesting parse_json lets through to check_config_tree (past it, Python's JSON reader recurses out first)
_PARSE_DEPTH = 1 << 16

# YAML 1.1 (pyyaml) reads 1e-3 as a string; every YAML 1.2 reader and every user reads it as a number.
_FLOAT_RE = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.VERBOSE)


def _yaml():
    try:
        import yaml
    except ImportError:
        return None
    return yaml


def _loader():
    yaml = _yaml()

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789."))
    return Loader


def _parse_json(text: str, where: str, note: str) -> Any:
    """``text`` parsed as JSON by :func:`~layerscale.untrusted_files.parse_json` (any top-level value; ``NaN``,
    ``Infinity`` and ``1e400`` kept, as Python's reader reads them): one-line ``ValueError`` naming ``where``
    (:class:`~layerscale.untrusted_files.NotJSONError` for what is no JSON text, the int-string limit named for a
    too-long integer). Nesting is left to :func:`check_config_tree`, which names where it goes too deep; only what
    Python's reader cannot hold at all is refused here, in the same words (``note`` after them)."""
    try:
        return parse_json(text, where, expected=object, max_depth=_PARSE_DEPTH, finite=False)
    except JSONTooDeepError:
        raise ValueError(f"{where}: nested more than {MAX_DEPTH} levels deep{' ' + note if note else ''}") from None


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping stored in a ``.yaml`` / ``.yml`` / ``.json`` file (safe loaders only: no objects, no code)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(f"{path}: config file not found")
    return parse_config_text(read_config_text(path), path)


def parse_config_text(text: str, path: str | Path) -> dict[str, Any]:
    """The mapping in ``text``, the content of config file ``path`` (whose suffix says YAML or JSON; named in every
    one-line ``ValueError``): parsed with the safe loaders, an empty file as ``{}``, the tree bounded
    (:func:`~layerscale.train.config.config_tree.check_config_tree`)."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        data = _parse_json(text, str(path), "(not a training config)")
    elif path.suffix.lower() in (".yaml", ".yml"):
        yaml = _yaml()
        if yaml is None:
            try:  # a config.yaml written without pyyaml is JSON
                data = _parse_json(text, str(path), "(not a training config)")
            except NotJSONError:
                raise ImportError(f"{path}: reading YAML needs pyyaml: {_EXTRA_HINT} (or use a .json config)") from None
        else:
            try:
                data = yaml.load(text, Loader=_loader())
            except yaml.YAMLError as exc:
                raise ValueError(f"{path}: not valid YAML ({shown_name(' '.join(str(exc).split()), 300)})") from None
            except RecursionError:
                raise ValueError(f"{path}: nested more than {MAX_DEPTH} levels deep (not a training config)") from None
            except ValueError as exc:  # e.g. an integer of more than 4300 digits
                raise ValueError(f"{path}: not a valid YAML value ({shown_name(exc, 300)})") from None
    else:
        raise ValueError(f"{path}: config files must end in .yaml, .yml or .json, got {path.suffix or 'no suffix'!r}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file must hold a mapping of sections, got {type(data).__name__}")
    check_config_tree(data, str(path))
    return data


#: Bytes a config file may have (a complete config with every key written out is about 3 KB).
MAX_CONFIG_BYTES = 1 << 20


def read_config_text(path: Path) -> str:
    """The text of config file ``path``: a regular file of at most :data:`MAX_CONFIG_BYTES` bytes, UTF-8; a
    one-line ``ValueError`` otherwise (a directory, a FIFO or a device is named as what it is, not as missing)."""
    described = describe_non_file(path)
    if described is not None:
        raise ValueError(f"{path}: is {described}; a config is a .yaml, .yml or .json file")
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the config file ({exc.strerror or exc})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: more than {MAX_CONFIG_BYTES:,} bytes; a training config is a few KB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def parse_scalar(text: str) -> Any:
    """A ``--set`` value as a YAML scalar: ``48`` -> int, ``1e-3`` -> float, ``true`` -> bool, ``null`` -> None,
    ``[0.9, 0.95]`` -> list, anything else -> the string itself."""
    yaml = _yaml()
    if yaml is not None:
        try:
            value = yaml.load(text, Loader=_loader())
        except yaml.YAMLError:
            return text
        except RecursionError:
            raise ValueError(f"--set value {shown_name(text)}: nested more than {MAX_DEPTH} levels deep") from None
        except ValueError as exc:  # e.g. an integer of more than 4300 digits
            raise ValueError(f"--set value {shown_name(text)}: not a valid YAML value ({shown_name(exc)})") from None
        check_config_tree(value, f"--set value {shown_name(text, 60)}")
        return value
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~", ""):
        return None
    where = f"--set value {shown_name(text)}"
    try:
        value = _parse_json(text, where, "")
    except NotJSONError:
        return text
    check_config_tree(value, f"--set value {shown_name(text, 60)}")
    return value


def apply_overrides(config: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """A copy of ``config`` with each ``section.key=value`` (or deeper dotted path) set; the value is parsed by
    :func:`parse_scalar`. Unknown keys are left for validation to report."""
    out = copy.deepcopy(config)
    for item in overrides:
        dotted, sep, value = item.partition("=")
        parts = dotted.strip().split(".")
        if not sep or len(parts) < 2 or not all(parts):
            raise ValueError(f"--set {item!r}: expected section.key=value, e.g. model.depth=12")
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ValueError(f"--set {item!r}: {part!r} is not a section")
            node = child
        node[parts[-1]] = parse_scalar(value)
    return out


def dotted_items(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``tree`` as one level of dotted keys, the inverse of :func:`apply_overrides`' paths:
    ``{"optim": {"lr": 1e-3}}`` → ``{"optim.lr": 1e-3}``. A non-mapping value (a list included) is a leaf."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(dotted_items(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def dump_config(config: dict[str, Any]) -> str:
    """``config`` as YAML text (keys in section order), or as JSON text without pyyaml."""
    yaml = _yaml()
    if yaml is None:
        return json.dumps(config, indent=2) + "\n"
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
