"""The study grid: methods × depths × seeds, each method at its own tuned learning rate and at a shared one.

A study is a base training config (``docs/training.md``) plus the lists of residual methods, depths, seeds and
learning rates. Every run's config differs from the base only in ``model.residual``, ``model.depth``,
``optim.lr``, ``run.seed`` and the study's own keys (validation split, early stopping, the pause step of tuning
runs, its run directory).

Two kinds of run:

- **tuning runs** (``runs/tune/<method>-d<depth>-lr<lr>-s<tune_seed>``): every learning rate of ``lrs`` for every
  (method, depth), with the tuning seed, evaluated on the validation split only (``run.evaluate_test: false``);
  successive halving pauses and continues them (:mod:`layerscale.study.run.tuning`);
- **final runs** (``runs/<method>-d<depth>-lr<lr>-s<seed>``): every seed at the tuned learning rate of the cell
  and at the shared learning rate, trained to the full budget (or early stopping) and evaluated once on the
  test split. A cell whose tuned rate is the shared one shares its final runs between both tables.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...messages import shown_value
from ...suggest import did_you_mean
from .spec_fields import check_spec_fields

__all__ = ["StudySpec", "RunSpec", "SPEC_FILE", "RUNS_DIR", "TUNE_DIR", "TUNING_MODES", "LEGACY_DESIGN", "format_lr"]

SPEC_FILE = "study.json"
RUNS_DIR = "runs"
TUNE_DIR = "tune"


#: the rate-selection modes (:mod:`layerscale.study.run.tuning`); ``fixed``: each cell's rate is part of the design
#: (``fixed_rates``), as in a confirmatory study that re-runs another study's chosen rates on fresh seeds
TUNING_MODES = ("halving", "grid", "fixed")

#: what a study file written before a design key existed meant by its absence: one tuning seed, no grid extension,
#: no bootstrap (so an earlier study continues, and rebuilds its tables, exactly as it was run)
LEGACY_DESIGN = {"tuning": "halving", "tune_seeds": 1, "extend_grid": 0, "bootstrap": 0, "primary_seeds": 0,
                 "primary_declared": False}


def format_lr(lr: float | None) -> str:
    """The learning rate as it appears in run ids and tables: ``1e-3`` → ``0.001``; ``3e-4`` → ``0.0003``;
    ``None`` (a cell whose tuning has not finished) → ``not tuned yet``."""
    return "not tuned yet" if lr is None else f"{lr:g}"


def _is_rate(value) -> bool:
    """A learning rate: a finite number above 0 (a bool is no number here)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class RunSpec:
    """One run: what it varies, whether it tunes or reports, its pause step (0: full budget) and its config."""

    method: str
    depth: int
    lr: float
    seed: int
    kind: str  # "tune" | "final"
    config: dict[str, Any]
    stop_at_step: int = 0

    @property
    def run_id(self) -> str:
        return f"{self.method}-d{self.depth}-lr{format_lr(self.lr)}-s{self.seed}"

    @property
    def run_dir(self) -> Path:
        return Path(self.config["run"]["out_dir"])


def _positive_ints(name: str, values) -> None:
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ValueError(f"--{name} must be positive integers, got {list(values)}")


@dataclass(frozen=True)
class StudySpec:
    """The study's design, validated on construction (every problem is one ``ValueError`` naming the value).

    ``lrs`` empty: no tuning, every run at the shared rate ``base['optim']['lr']``. ``reference``: the method the
    paired differences are taken against (default ``prenorm`` when studied, else the first method).
    ``validation_fraction``: the share of the training split held out for tuning and early stopping.
    Successive halving starts every rate at ``min_budget`` of the budget and keeps the best ``1/halving_rate``
    (rounded up) at each rung. ``patience``/``min_delta``: early stopping (0: off). ``target``: the validation
    accuracy (classification) or loss (text) whose first crossing is reported as steps-to-target.
    """

    methods: tuple[str, ...]
    depths: tuple[int, ...]
    seeds: tuple[int, ...]
    base: dict[str, Any] = field(default_factory=dict)
    lrs: tuple[float, ...] = ()
    reference: str | None = None
    validation_fraction: float = 0.1
    tune_seed: int = 1000
    min_budget: float = 0.5
    halving_rate: int = 3
    patience: int = 0
    min_delta: float = 0.0
    target: float | None = None
    shared_table: bool = True
    #: DepthBench-style shape sweep: ``(method, depth, width)`` for every cell, chosen so that every cell has the
    #: same parameter budget (:func:`layerscale.study.design.shapes.choose_shapes`); empty: every cell at the base width
    shapes: tuple[tuple[str, int, int], ...] = ()
    #: how a cell's rate is chosen: ``halving`` (successive halving, ``tune_seeds`` seeds from ``min_budget``) or
    #: ``grid`` (every rate × every reported seed at the full budget, chosen by mean validation score)
    tuning: str = "halving"
    tune_seeds: int = 2
    #: a cell whose choice is at the edge of its rates gets one more rate outward (×3 or ÷3), at most this often
    extend_grid: int = 1
    #: the primary family (Holm-adjusted): ``method@depth`` (against the reference at that depth, tuned table) or
    #: ``method@shallow:deep`` (the depth-use interaction); empty: every method at the deepest depth
    primary: tuple[str, ...] = ()
    #: two-level bootstrap draws (seeds × test examples) for the primary family (0: none)
    bootstrap: int = 0
    #: seeds ``0 … N−1`` for the cells the primary family compares (0: ``seeds`` like every other cell)
    primary_seeds: int = 0
    #: whether the design named its primary family before its runs (``False`` only for a study file that predates
    #: primary families: its family is the default, applied afterwards, and the report says so)
    primary_declared: bool = True
    #: the design names no primary family (``--primary none``): every comparison is exploratory, Benjamini–Hochberg
    #: adjusted (a study of methods added to another study's grid, none of them a pre-registered claim)
    exploratory_only: bool = False
    #: ``tuning: fixed``: ``(method, depth, lr)`` for every cell, the design's rate for that cell (nothing is tuned;
    #: ``lrs`` is empty and there is no shared table)
    fixed_rates: tuple[tuple[str, int, float], ...] = ()

    def __post_init__(self) -> None:
        from ...residual.registry import list_residuals  # here: the CLI builds presets without importing models

        known = list_residuals()
        if not self.methods:
            raise ValueError(f"--methods is empty; choose from: {', '.join(known)}")
        for method in self.methods:
            if method not in known:
                raise ValueError(f"unknown residual method {method!r} in --methods{did_you_mean(method, known)}; "
                                 f"known methods: {', '.join(known)}")
        _positive_ints("depths", self.depths)
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ValueError(f"seeds must be integers >= 0, got {list(self.seeds)}")
        for name, values in (("methods", self.methods), ("depths", self.depths), ("seeds", self.seeds),
                             ("lrs", self.lrs)):
            if len(set(values)) != len(values):
                raise ValueError(f"--{name} lists a value twice: {list(values)}")
        if not all(_is_rate(lr) for lr in self.lrs):
            raise ValueError(f"--lrs must be positive numbers, got {list(self.lrs)}")
        if self.reference is not None and self.reference not in self.methods:
            raise ValueError(f"--reference {self.reference!r} is not one of the studied methods "
                             f"({', '.join(self.methods)})")
        if self.reference is None:  # resolved once, so a saved study compares equal to the same design
            object.__setattr__(self, "reference", "prenorm" if "prenorm" in self.methods else self.methods[0])
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"--validation-fraction must be in [0, 1), got {self.validation_fraction}")
        if len(self.lrs) > 1 and self.validation_fraction <= 0:
            raise ValueError("tuning the learning rate (--lrs with more than one value) needs a validation split: "
                             f"--validation-fraction must be > 0, got {self.validation_fraction}")
        if self.tuning not in TUNING_MODES:
            raise ValueError(f"--tuning must be one of {', '.join(TUNING_MODES)}, got {self.tuning!r}")
        for name, value, low in (("tune-seeds", self.tune_seeds, 1), ("extend-grid", self.extend_grid, 0),
                                 ("bootstrap", self.bootstrap, 0), ("primary-seeds", self.primary_seeds, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"--{name} must be an integer >= {low}, got {value!r}")
        if self.bootstrap > 100_000:
            raise ValueError(f"--bootstrap must be at most 100000 draws, got {self.bootstrap}")
        if self.primary_seeds and self.primary_seeds < len(self.seeds):
            raise ValueError(f"--primary-seeds must be at least the {len(self.seeds)} seeds of every cell, got "
                             f"{self.primary_seeds}")
        clash = sorted(set(self.tuning_seeds) & set(self.seeds) | set(self.tuning_seeds) & set(self.all_seeds))
        if self.tuning == "halving" and clash:
            raise ValueError(f"the tuning seed {clash[0]} is also a reporting seed; the tuning runs must be separate "
                             "from the reported ones (--tune-seed)")
        if self.exploratory_only and (self.primary or self.primary_seeds or self.bootstrap):
            raise ValueError("--primary none names no primary family; it takes no other --primary entry, "
                             "--primary-seeds or --bootstrap (both are for the primary family)")
        if not self.exploratory_only:
            object.__setattr__(self, "primary", self._resolve_primary(tuple(self.primary)))
        self._check_fixed_rates()
        if not 0.0 < self.min_budget <= 1.0:
            raise ValueError(f"--min-budget must be in (0, 1], got {self.min_budget}")
        if isinstance(self.halving_rate, bool) or not isinstance(self.halving_rate, int) or self.halving_rate < 2:
            raise ValueError(f"--halving-rate must be an integer >= 2, got {self.halving_rate}")
        if isinstance(self.patience, bool) or not isinstance(self.patience, int) or self.patience < 0:
            raise ValueError(f"--patience must be an integer >= 0, got {self.patience}")
        for name, value in (("target", self.target), ("min-delta", self.min_delta)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise ValueError(f"--{name} must be a finite number, got {str(value)[:40]!r}")
        if not isinstance(self.base, dict):
            raise ValueError(f"the study's base config must be a mapping, got a {type(self.base).__name__}")
        if not _is_rate(shared := self._given_shared_lr()):
            raise ValueError(f"config key optim.lr (the shared learning rate, --lr): expected a positive number, "
                             f"got {shown_value(shared)}")
        if self.shapes:
            object.__setattr__(self, "shapes", tuple(tuple(row) for row in self.shapes))
            missing = [f"{m} at depth {d}" for m, d in self.cells() if self.width(m, d) is None]
            if missing or len(self.shapes) != len(self.cells()):
                raise ValueError(f"--shapes must give one width per method and depth; missing: "
                                 f"{', '.join(missing) or 'none'} ({len(self.shapes)} shapes for "
                                 f"{len(self.cells())} cells)")

    def _check_fixed_rates(self) -> None:
        """``tuning: fixed`` needs one positive rate per cell, no rate grid and no shared table; other modes none."""
        if self.tuning != "fixed":
            if self.fixed_rates:
                raise ValueError(f"fixed_rates is only for --tuning fixed, got tuning {self.tuning!r}")
            return
        rows = tuple(tuple(row) for row in self.fixed_rates)
        object.__setattr__(self, "fixed_rates", rows)
        if self.lrs or self.shared_table:
            raise ValueError("--tuning fixed takes each cell's rate from fixed_rates: give no --lrs and no shared "
                             f"table (got lrs {list(self.lrs)}, shared_table {self.shared_table})")
        for row in rows:
            ok = len(row) == 3 and (row[0], row[1]) in self.cells()
            lr = row[2] if len(row) == 3 else None
            if not ok or isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
                raise ValueError(f"fixed_rates row {list(row)} must be [METHOD, DEPTH, LR] with a studied cell and a "
                                 "positive learning rate")
        missing = [f"{m}@{d}" for m, d in self.cells() if sum((r[0], r[1]) == (m, d) for r in rows) != 1]
        if missing:
            raise ValueError(f"fixed_rates must give exactly one rate per cell; missing or repeated: "
                             f"{', '.join(missing)}")

    def fixed_rate(self, method: str, depth: int) -> float:
        """The design's rate of one cell under ``tuning: fixed``."""
        return float(next(lr for m, d, lr in self.fixed_rates if (m, d) == (method, depth)))

    @property
    def fixed(self) -> bool:
        """Whether each cell's rate is fixed by the design (``tuning: fixed``)."""
        return self.tuning == "fixed"

    def _resolve_primary(self, entries: tuple[str, ...]) -> tuple[str, ...]:
        """Validate ``primary`` entries; the default family is every method at the deepest depth."""
        if not entries:
            return tuple(f"{m}@{max(self.depths)}" for m in self.methods if m != self.reference)
        for entry in entries:
            method, _, depths = str(entry).partition("@")
            parts = depths.split(":")
            ok = method in self.methods and method != self.reference and 1 <= len(parts) <= 2
            try:
                values = [int(p) for p in parts]
            except ValueError:
                ok = False
            else:
                ok = ok and all(d in self.depths for d in values) and (len(values) == 1 or values[0] < values[1])
            if not ok:
                raise ValueError(f"--primary entry {entry!r} must be METHOD@DEPTH or METHOD@SHALLOW:DEEP with a "
                                 f"studied method other than the reference {self.reference!r} and studied depths "
                                 f"({', '.join(map(str, self.depths))})")
        if len(set(entries)) != len(entries):
            raise ValueError(f"--primary lists an entry twice: {list(entries)}")
        return entries

    # ------------------------------------------------------------------------------------------------ derived
    @property
    def all_seeds(self) -> tuple[int, ...]:
        """Every reported seed of the study (``seeds`` and, with ``primary_seeds``, the primary cells' extra ones)."""
        return tuple(range(self.primary_seeds)) if self.primary_seeds else tuple(self.seeds)

    def primary_cells(self) -> set[tuple[str, int]]:
        """The ``(method, depth)`` cells the primary family compares (its methods and the reference there)."""
        cells = set()
        for entry in self.primary:
            method, _, depths = entry.partition("@")
            for depth in (int(d) for d in depths.split(":")):
                cells |= {(method, depth), (self.reference, depth)}
        return cells

    def seeds_for(self, method: str, depth: int) -> tuple[int, ...]:
        """The reported seeds of one cell: ``primary_seeds`` of them in a primary cell, else ``seeds``."""
        if self.primary_seeds and (method, depth) in self.primary_cells():
            return self.all_seeds
        return tuple(self.seeds)

    @property
    def tuning_seeds(self) -> tuple[int, ...]:
        """The seeds of the tuning runs (successive halving): ``tune_seed`` and the next ``tune_seeds − 1``."""
        return tuple(range(self.tune_seed, self.tune_seed + self.tune_seeds))

    @property
    def reference_method(self) -> str:
        return self.reference

    @property
    def shared_lr(self) -> float:
        """The one learning rate of the shared table (the base config's ``optim.lr``, default 1e-3)."""
        return float(self._given_shared_lr())

    def _given_shared_lr(self) -> Any:
        """The base config's ``optim.lr`` as given (default 1e-3), before it is checked to be a rate."""
        optim = self.base.get("optim")
        return optim.get("lr", 1e-3) if isinstance(optim, dict) else 1e-3

    @property
    def tuned(self) -> bool:
        return len(self.lrs) > 1

    def width(self, method: str, depth: int) -> int | None:
        """The cell's width under a shape sweep (``None`` without one: the base's width)."""
        return next((w for m, d, w in self.shapes if (m, d) == (method, depth)), None)

    def cells(self) -> list[tuple[str, int]]:
        """``(method, depth)`` in the grid's fixed order (depth, then method)."""
        return [(m, d) for d in self.depths for m in self.methods]

    def run(self, study_dir: Path, method: str, depth: int, lr: float, seed: int, kind: str,
            stop_at_step: int = 0) -> RunSpec:
        """The :class:`RunSpec` of one run, its config derived from the base."""
        config = copy.deepcopy(self.base)
        config.setdefault("model", {}).update(residual=method, depth=depth)
        if self.shapes:
            config["model"]["embed_dim"] = self.width(method, depth)
        config.setdefault("optim", {})["lr"] = float(lr)
        data = config.setdefault("data", {})
        data["validation_fraction"] = self.validation_fraction
        run = config.setdefault("run", {})
        run.update(seed=seed, patience=self.patience, min_delta=self.min_delta, stop_at_step=stop_at_step,
                   evaluate_test=kind == "final")
        spec = RunSpec(method, depth, float(lr), seed, kind, config, stop_at_step)
        folder = study_dir / RUNS_DIR / (TUNE_DIR if kind == "tune" else "")
        run["out_dir"] = str(folder / spec.run_id)
        return spec

    def final_runs(self, study_dir: Path, chosen: dict[tuple[str, int], float],
                   every_rate: dict[tuple[str, int], tuple[float, ...]] | None = None) -> list[RunSpec]:
        """Every seed of every cell at its chosen rate and (with ``shared_table``) at the shared rate; a run
        needed by both tables appears once. ``every_rate`` (``tuning: grid``): every rate each cell tried has
        final runs, which are its tuning."""
        runs: dict[str, RunSpec] = {}
        for method, depth in self.cells():
            tuned = chosen.get((method, depth), self.shared_lr)  # None: tuning not finished (report only)
            rates = [tuned] if tuned is not None else []
            if every_rate is not None:
                rates = [*every_rate.get((method, depth), ()), *rates]
            if self.shared_table:
                rates.append(self.shared_lr)
            for lr in rates:
                for seed in self.seeds_for(method, depth):
                    r = self.run(study_dir, method, depth, lr, seed, "final")
                    runs.setdefault(r.run_id, r)
        return list(runs.values())

    # ---------------------------------------------------------------------------------------------- storage
    def to_dict(self) -> dict[str, Any]:
        return {"methods": list(self.methods), "depths": list(self.depths), "seeds": list(self.seeds),
                "lrs": list(self.lrs), "reference": self.reference_method,
                "validation_fraction": self.validation_fraction, "tune_seed": self.tune_seed,
                "min_budget": self.min_budget, "halving_rate": self.halving_rate, "patience": self.patience,
                "min_delta": self.min_delta, "target": self.target, "shared_table": self.shared_table,
                "shapes": [list(row) for row in self.shapes], "tuning": self.tuning, "tune_seeds": self.tune_seeds,
                "extend_grid": self.extend_grid, "primary": list(self.primary), "bootstrap": self.bootstrap,
                "primary_seeds": self.primary_seeds, "primary_declared": self.primary_declared,
                # only when used, so every study file written before the key existed reads back byte-identically
                **({"fixed_rates": [list(row) for row in self.fixed_rates]} if self.fixed_rates else {}),
                **({"exploratory_only": True} if self.exploratory_only else {}),
                "base": self.base}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> StudySpec:
        """The design a study file records; a field of the wrong type is one ``ValueError`` (:mod:`.spec_fields`)."""
        check_spec_fields(raw)
        keys = ("lrs", "reference", "validation_fraction", "tune_seed", "min_budget", "halving_rate", "patience",
                "min_delta", "target", "shared_table", "shapes", "tuning", "tune_seeds", "extend_grid", "primary",
                "bootstrap", "primary_seeds", "primary_declared", "fixed_rates", "exploratory_only")
        raw = {**LEGACY_DESIGN, **raw}
        extra = {k: (tuple(raw[k]) if k in ("lrs", "shapes", "primary", "fixed_rates") else raw[k]) for k in keys
                 if k in raw}
        return cls(tuple(raw["methods"]), tuple(raw["depths"]), tuple(raw["seeds"]), raw.get("base", {}), **extra)

    def check_compatible(self, study_dir: Path) -> None:
        """Refuse to continue a study directory that was started with a different design."""
        path = study_dir / SPEC_FILE
        if not path.is_file():
            return
        from ...untrusted_files import read_json_file

        try:
            saved = read_json_file(path)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable study file ({str(exc).splitlines()[0]})") from None
        saved.pop("executor", None)  # where the runs execute (study.executors): the results do not depend on it
        # A key a study file predates takes its default (a study started by an earlier version continues).
        defaults = StudySpec(self.methods, self.depths, self.seeds, self.base).to_dict()
        saved = {**{k: v for k, v in defaults.items() if k not in ("methods", "depths", "seeds", "base",
                                                                    "reference")}, **LEGACY_DESIGN, **saved}
        current = json.loads(json.dumps(self.to_dict()))
        if saved != current:
            differing = [k for k in current if saved.get(k) != current[k]]
            raise ValueError(f"{study_dir} holds a study with different {', '.join(differing)}; use another --out, "
                             "or continue it with the same arguments or with none of --preset and the design "
                             "options (its study.json is then the design)")
