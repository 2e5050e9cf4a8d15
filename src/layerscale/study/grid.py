"""The study grid: every (method, depth, seed) combination with the same data, optimiser and budget.

A study is a base training config (a mapping of sections, see ``docs/training.md``) plus the lists of residual
methods, depths and seeds. Each combination becomes one run whose config differs from the base only in
``model.residual``, ``model.depth`` and ``run.seed`` (and its own ``run.out_dir``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..residual.registry import list_residuals

__all__ = ["StudySpec", "RunSpec", "SPEC_FILE", "RUNS_DIR"]

SPEC_FILE = "study.json"
RUNS_DIR = "runs"


@dataclass(frozen=True)
class RunSpec:
    """One cell of the grid: its id (the run directory's name) and its full training config."""

    method: str
    depth: int
    seed: int
    config: dict[str, Any]

    @property
    def run_id(self) -> str:
        return f"{self.method}-d{self.depth}-s{self.seed}"


@dataclass(frozen=True)
class StudySpec:
    """``methods × depths × seeds`` over ``base`` (a training config mapping). Validated on construction."""

    methods: tuple[str, ...]
    depths: tuple[int, ...]
    seeds: tuple[int, ...]
    base: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        known = list_residuals()
        if not self.methods:
            raise ValueError(f"--methods is empty; choose from: {', '.join(known)}")
        for method in self.methods:
            if method not in known:
                raise ValueError(f"unknown residual method {method!r} in --methods; known methods: {', '.join(known)}")
        if not self.depths or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in self.depths):
            raise ValueError(f"--depths must be positive integers, got {list(self.depths)}")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ValueError(f"seeds must be integers >= 0, got {list(self.seeds)}")
        for name, values in (("methods", self.methods), ("depths", self.depths), ("seeds", self.seeds)):
            if len(set(values)) != len(values):
                raise ValueError(f"--{name} lists a value twice: {list(values)}")

    def runs(self, study_dir: Path) -> list[RunSpec]:
        """The grid in a fixed order (depth, then method, then seed) with each run's directory set."""
        runs = []
        for depth in self.depths:
            for method in self.methods:
                for seed in self.seeds:
                    config = copy.deepcopy(self.base)
                    config.setdefault("model", {}).update(residual=method, depth=depth)
                    run = config.setdefault("run", {})
                    run["seed"] = seed
                    spec = RunSpec(method, depth, seed, config)
                    run["out_dir"] = str(study_dir / RUNS_DIR / spec.run_id)
                    runs.append(spec)
        return runs

    def to_dict(self) -> dict[str, Any]:
        return {"methods": list(self.methods), "depths": list(self.depths), "seeds": list(self.seeds),
                "base": self.base}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> StudySpec:
        return cls(tuple(raw["methods"]), tuple(raw["depths"]), tuple(raw["seeds"]), raw.get("base", {}))

    def check_compatible(self, study_dir: Path) -> None:
        """Refuse to continue a study directory that was started with a different grid or base config."""
        path = study_dir / SPEC_FILE
        if not path.is_file():
            return
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: unreadable study file ({exc})") from None
        current = json.loads(json.dumps(self.to_dict()))
        if saved != current:
            differing = [k for k in current if saved.get(k) != current[k]]
            raise ValueError(f"{study_dir} holds a study with different {', '.join(differing)}; use another --out "
                             "or the same arguments to continue it")
