"""The packages beyond torch a study needs, checked before it writes anything.

A study trains every run with ``layerscale train`` (configs in YAML, checkpoints in safetensors, whose writer
needs NumPy), reads its data (scikit-learn's digits), computes its statistics with SciPy and, unless told not to,
draws its report with matplotlib. Without this check a torch-only install failed every run one after the other and
learned of SciPy or matplotlib only after hours of training; now one line names every package missing and the one
``pip install`` that brings them (``layerscale demo`` runs the same check on its preset).
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["missing_packages_line"]

#: import name -> (package name, extra of torch-layerscale that installs it)
_TRAINING = {"yaml": ("pyyaml", "train"), "safetensors": ("safetensors", "train"), "numpy": ("numpy", "train")}
_STATISTICS = {"scipy": ("scipy", "stats")}
_REPORT = {"matplotlib": ("matplotlib", "plots")}
#: dataset name -> what reading it imports
_DATASETS = {"digits": {"sklearn": ("scikit-learn", "data")}}


def _needed(base: dict[str, Any], train: bool, report: bool) -> dict[str, tuple[str, str]]:
    needed = dict(_STATISTICS)
    if train:
        data = base.get("data") if isinstance(base.get("data"), dict) else {}
        needed.update(_DATASETS.get(data.get("name"), {}))
        needed.update(_TRAINING)
    if report:
        needed.update(_REPORT)
    return needed


def missing_packages_line(who: str, base: dict[str, Any], *, train: bool = True, report: bool = True) -> str | None:
    """One line naming every package ``who`` (``"the demo"``, ``"layerscale study"``) needs and cannot import,
    with the ``pip install`` of the extras that bring them all; ``None`` when nothing is missing. ``base`` is the
    study's base training config (its ``data.name`` says which reader runs); ``train`` (runs to train) and
    ``report`` (``report.html`` to draw) add what those need."""
    missing = {module: need for module, need in _needed(base, train, report).items()
               if importlib.util.find_spec(module) is None}
    if not missing:
        return None
    extras = sorted({extra for _, extra in missing.values()})
    return (f"{who} needs {', '.join(package for package, _ in missing.values())}, not installed here: "
            f"pip install 'torch-layerscale[{','.join(extras)}]'")
