"""Choosing every cell's learning rate: the two modes of :mod:`layerscale.study.run.tuning` run over the whole grid at
once (rung by rung, so all cells' runs share the process pool), with the grid extension where a cell's best mean is
at an edge, and the record of it all in ``tuning.json``.

Only the validation split is read here. With ``report_only`` the pool trains nothing and every choice is rebuilt
from the run folders as they are (a cell whose runs are unfinished has no choice yet: ``None``). A cell whose grid
extension has not ended (``TuningOutcome.pending``) keeps, under ``--tuning grid``, the tie rule's choice among the
rates that ran, marked provisional: its final runs are the grid's own, which no choice changes, and the tables say
the extension is pending. Under successive halving it has no choice until the extension ends (its final runs
would be trained at the rate chosen).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...atomic_io import write_json_atomic
from .executor import RunFailure, is_done
from ..design.grid import RunSpec, StudySpec, format_lr
from .tuning import (RateChoice, RungResult, choose_rate, extension_for_best, mean_score, rung_steps, run_score,
                     select)
from .worker import read_status

__all__ = ["TUNING_FILE", "TuningOutcome", "tune_study", "search_rates"]

TUNING_FILE = "tuning.json"

Cell = tuple[str, int]


@dataclass
class TuningOutcome:
    """Per cell: the chosen rate (``None``: not finished), how it was chosen, the rates tried (extensions
    included), the rungs; and every tuning run (for ``runs.csv``) and failure."""

    chosen: dict[Cell, float | None]
    choices: dict[Cell, RateChoice] = field(default_factory=dict)
    rates: dict[Cell, tuple[float, ...]] = field(default_factory=dict)
    extended: dict[Cell, tuple[float, ...]] = field(default_factory=dict)
    #: extension rates whose runs have not all ended (in ``rates`` too): the cell's choice is provisional
    pending: dict[Cell, tuple[float, ...]] = field(default_factory=dict)
    rungs: dict[Cell, list[RungResult]] = field(default_factory=dict)
    tune_runs: list[RunSpec] = field(default_factory=list)
    failures: list[RunFailure] = field(default_factory=list)


def _score(run: RunSpec, step: int, higher_is_better: bool) -> float:
    status = read_status(run.run_dir) or {}
    return run_score(run.run_dir, step, higher_is_better, diverged=status.get("status") in (None, "diverged"))


class _Search:
    """One study's rate search; ``runs_for(cell, lr, step)`` are the runs that score ``lr`` in ``cell``."""

    def __init__(self, spec: StudySpec, study_dir: Path, total_steps: int, higher_is_better: bool, pool):
        self.spec, self.study_dir, self.total, self.higher = spec, study_dir, total_steps, higher_is_better
        self.pool = pool
        self.out = TuningOutcome(chosen={cell: None for cell in spec.cells()},
                                 rates={cell: tuple(spec.lrs) for cell in spec.cells()},
                                 extended={cell: () for cell in spec.cells()},
                                 rungs={cell: [] for cell in spec.cells()})
        self._tune_runs: dict[str, RunSpec] = {}

    def runs_for(self, cell: Cell, lr: float, step: int) -> list[RunSpec]:
        method, depth = cell
        if self.spec.tuning == "grid":
            return [self.spec.run(self.study_dir, method, depth, lr, seed, "final")
                    for seed in self.spec.seeds_for(method, depth)]
        runs = [self.spec.run(self.study_dir, method, depth, lr, seed, "tune", stop_at_step=step)
                for seed in self.spec.tuning_seeds]
        for run in runs:
            self._tune_runs[run.run_id] = run
        return runs

    def train(self, jobs: dict[tuple[Cell, float], list[RunSpec]], desc: str) -> None:
        self.out.failures += self.pool([r for runs in jobs.values() for r in runs], desc)

    def scores(self, runs: list[RunSpec], step: int) -> tuple[float, ...] | None:
        if not all(is_done(r) for r in runs):
            return None
        return tuple(_score(r, step, self.higher) for r in runs)

    # ------------------------------------------------------------------------------------------------- modes
    def halving(self) -> dict[Cell, tuple[int, dict[float, tuple[float, ...]]]]:
        """Successive halving; returns each finished cell's deciding rung: its step and per-seed scores."""
        spec, decided = self.spec, {}
        candidates = {cell: tuple(spec.lrs) for cell in spec.cells()}
        for index, stop in enumerate(rung_steps(self.total, len(spec.lrs), spec.min_budget, spec.halving_rate)):
            jobs = {(cell, lr): self.runs_for(cell, lr, stop) for cell, lrs in candidates.items() for lr in lrs}
            self.train(jobs, f"tuning rung {index} (step {stop} of {self.total}, "
                             f"{len(spec.tuning_seeds)} seed(s) per rate)")
            for cell, lrs in list(candidates.items()):
                per_seed = {lr: self.scores(jobs[(cell, lr)], stop) for lr in lrs}
                if any(v is None for v in per_seed.values()):
                    del candidates[cell]
                    continue
                means = {lr: mean_score(v) for lr, v in per_seed.items()}
                kept = select(means, tuple(spec.lrs), max(1, -(-len(lrs) // spec.halving_rate)))
                self.out.rungs[cell].append(RungResult(index, stop, means, kept, per_seed))
                candidates[cell] = kept
                decided[cell] = (stop, per_seed)
            candidates = {cell: lrs for cell, lrs in candidates.items() if len(lrs) > 1}
            if not candidates:
                break
        return decided

    def grid(self) -> dict[Cell, tuple[int, dict[float, tuple[float, ...]]]]:
        """Every rate × every reported seed at the full budget, scored at its end on the validation split."""
        jobs = {(cell, lr): self.runs_for(cell, lr, self.total) for cell in self.spec.cells() for lr in self.spec.lrs}
        self.train(jobs, f"rate grid ({len(self.spec.lrs)} rates x {len(self.spec.seeds)} seeds at the full budget)")
        decided = {}
        for cell in self.spec.cells():
            per_seed = {lr: self.scores(jobs[(cell, lr)], self.total) for lr in self.spec.lrs}
            if all(v is not None for v in per_seed.values()):
                means = {lr: mean_score(v) for lr, v in per_seed.items()}
                self.out.rungs[cell].append(RungResult(0, self.total, means, tuple(self.spec.lrs), per_seed))
                decided[cell] = (self.total, per_seed)
        return decided

    # ------------------------------------------------------------------------------------------------ choice
    def choose_and_extend(self, decided: dict) -> None:
        """Extend every cell whose **best mean** is at an edge of its rates (issue 60: never the tie rule's
        choice, which a tie toward the shared rate can pull inward), then let the tie rule choose among every rate
        the cell tried, up to ``extend_grid`` times."""
        spec = self.spec
        for cell, (_, per_seed) in decided.items():
            self._choose(cell, per_seed)
        for round_index in range(spec.extend_grid):
            wanted = {}
            for cell, (step, per_seed) in decided.items():
                choice = self.out.choices.get(cell)
                new = extension_for_best(per_seed, self.out.rates[cell], choice) if choice else None
                if new is not None:
                    wanted[(cell, new)] = self.runs_for(cell, new, step)
            if not wanted:
                break
            self.train(wanted, f"grid extension {round_index + 1} ({len(wanted)} cell(s) with the best mean at an "
                               "edge)")
            for (cell, new), runs in wanted.items():
                step, per_seed = decided[cell]
                scores = self.scores(runs, step)
                self.out.rates[cell] = tuple(sorted((*self.out.rates[cell], new)))
                decided = {c: v for c, v in decided.items() if c != cell} if scores is None else decided
                if scores is None:  # the extension has not ended: the choice waits for it
                    self.out.pending[cell] = (*self.out.pending.get(cell, ()), new)
                    if spec.tuning != "grid":  # the final runs would be trained at the rate chosen
                        self.out.choices.pop(cell, None)
                        self.out.chosen[cell] = None
                    continue
                self.out.extended[cell] = (*self.out.extended[cell], new)
                per_seed[new] = scores
                self._choose(cell, per_seed)

    def _choose(self, cell: Cell, per_seed: dict[float, tuple[float, ...]]) -> None:
        choice = choose_rate(per_seed, self.spec.shared_lr, tuple(self.spec.lrs))
        self.out.choices[cell] = choice
        self.out.chosen[cell] = choice.lr


def _finite(value: float) -> float | None:
    return value if value != float("-inf") else None


def tune_study(spec: StudySpec, study_dir: Path, total_steps: int, higher_is_better: bool, pool) -> TuningOutcome:
    """Choose every cell's rate (see the module docstring) and write ``tuning.json``. Without tuning (one rate or
    none) every cell takes that rate."""
    if spec.fixed:
        out = TuningOutcome(chosen={(m, d): spec.fixed_rate(m, d) for m, d in spec.cells()})
        write_json_atomic(study_dir / TUNING_FILE, {
            "metric": "none: every cell's rate is fixed by the design (study.json fixed_rates)", "mode": "fixed",
            "cells": [{"method": m, "depth": d, "chosen_lr": out.chosen[(m, d)]} for m, d in spec.cells()]})
        return out
    if not spec.tuned:
        rate = spec.lrs[0] if len(spec.lrs) == 1 else spec.shared_lr
        return TuningOutcome(chosen={cell: rate for cell in spec.cells()})
    out = search_rates(spec, study_dir, total_steps, higher_is_better, pool)
    write_json_atomic(study_dir / TUNING_FILE, _tuning_record(spec, out, higher_is_better))
    return out


def search_rates(spec: StudySpec, study_dir: Path, total_steps: int, higher_is_better: bool, pool) -> TuningOutcome:
    """The rate search of a tuned study (the modes, then the grid extension), writing nothing itself. With a pool
    that trains nothing (``lambda runs, desc: []``) it reads the run folders as they are: what ``--dry-run`` lists
    as the extension runs the scores so far ask for (``TuningOutcome.pending``)."""
    search = _Search(spec, study_dir, total_steps, higher_is_better, pool)
    decided = search.grid() if spec.tuning == "grid" else search.halving()
    search.choose_and_extend(decided)
    out = search.out
    out.tune_runs = list(search._tune_runs.values())
    return out


def _tuning_record(spec: StudySpec, out: TuningOutcome, higher_is_better: bool) -> dict:
    cells = []
    for m, d in spec.cells():
        choice = out.choices.get((m, d))
        cells.append({
            "method": m, "depth": d, "chosen_lr": out.chosen[(m, d)],  # null: tuning not finished
            "best_lr": choice.best if choice else None,
            "tied_lrs": list(choice.tied) if choice and choice.is_tie else [],
            "rates": list(out.rates[(m, d)]), "extended_with": list(out.extended[(m, d)]),
            # only while an extension waits for its runs, so that every earlier record reads back byte-identically
            **({"extension_pending": list(out.pending[(m, d)])} if out.pending.get((m, d)) else {}),
            "rungs": [{"rung": r.rung, "step": r.step, "kept": list(r.kept),
                       "scores": {format_lr(lr): _finite(s) for lr, s in r.scores.items()},
                       "per_seed": {format_lr(lr): [_finite(v) for v in vs] for lr, vs in r.per_seed.items()}}
                      for r in out.rungs[(m, d)]]})
    return {"metric": "validation " + ("accuracy" if higher_is_better else "loss") + " (signed: larger is better)",
            "mode": spec.tuning,
            "seeds": list(spec.seeds if spec.tuning == "grid" else spec.tuning_seeds),
            "tie_rule": "one standard error of the paired per-seed difference from the best; ties resolved toward "
                        f"the shared rate {format_lr(spec.shared_lr)}",
            "cells": cells}
