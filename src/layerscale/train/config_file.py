"""Config files (YAML or JSON) and ``--set section.key=value`` overrides, turned into the plain dict that
:meth:`layerscale.train.config.TrainConfig.from_dict` validates.

YAML needs pyyaml (extra ``train``). JSON needs nothing, and since JSON is YAML, a run directory's ``config.yaml``
is written as JSON when pyyaml is absent, so it stays readable both ways.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["apply_overrides", "dump_config", "load_config_file", "parse_scalar"]

_EXTRA_HINT = "pip install 'torch-layerscale[train]'"

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


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping stored in a ``.yaml`` / ``.yml`` / ``.json`` file (safe loaders only: no objects, no code)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: config file not found")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from None
    elif path.suffix.lower() in (".yaml", ".yml"):
        yaml = _yaml()
        if yaml is None:
            try:  # a config.yaml written without pyyaml is JSON
                data = json.loads(text)
            except json.JSONDecodeError:
                raise ImportError(f"{path}: reading YAML needs pyyaml: {_EXTRA_HINT} (or use a .json config)") from None
        else:
            try:
                data = yaml.load(text, Loader=_loader())
            except yaml.YAMLError as exc:
                raise ValueError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    else:
        raise ValueError(f"{path}: config files must end in .yaml, .yml or .json, got {path.suffix or 'no suffix'!r}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file must hold a mapping of sections, got {type(data).__name__}")
    return data


def parse_scalar(text: str) -> Any:
    """A ``--set`` value as a YAML scalar: ``48`` -> int, ``1e-3`` -> float, ``true`` -> bool, ``null`` -> None,
    ``[0.9, 0.95]`` -> list, anything else -> the string itself."""
    yaml = _yaml()
    if yaml is not None:
        try:
            return yaml.load(text, Loader=_loader())
        except yaml.YAMLError:
            return text
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~", ""):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


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


def dump_config(config: dict[str, Any]) -> str:
    """``config`` as YAML text (keys in section order), or as JSON text without pyyaml."""
    yaml = _yaml()
    if yaml is None:
        return json.dumps(config, indent=2) + "\n"
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
