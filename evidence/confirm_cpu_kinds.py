"""Which CPU each confirmatory run ran on, and the primary comparisons repeated on the runs of one CPU kind: the
sensitivity check fixed before any result was read (docs/results/confirm/DESIGN.md, addendum of 2026-12-06
12:12 UTC). The design's primary family and its verdicts stay as they are; this is a labelled check beside them.

- A run's CPU kind is what its ``summary.json`` records under ``environment``: ``cpu`` and ``cpu_capability``
  (the instruction set torch dispatched to), ``"unrecorded"`` when either is missing.
- A comparison on one kind uses only the seeds whose runs of *both* arms ran on that kind: a cell comparison is
  the method minus the reference paired by seed (as the study's ``diff``, truncated to the metric's range); an
  interaction is Welch's interval between the two depths' paired differences (as
  :mod:`layerscale.study.report.contrasts`). It is computed where every paired difference it needs has at least
  :data:`MIN_SEEDS` seeds on that kind; otherwise the row says how many there are.
- Its verdict is by the interval alone (no adjustment: the check is not a family and carries no claim).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable, TypeVar

from layerscale.stats.intervals import Interval, paired_interval, p_value, welch_interval, within_range
from layerscale.study.design.metric import Metric
from layerscale.study.report.results_table import read_results
from layerscale.study.report.verdicts import verdict
from layerscale.study.run.csv_rows import read_rows
from layerscale.untrusted_files import UntrustedFileError, read_json_file

__all__ = ["MIN_SEEDS", "UNRECORDED", "read_each_run", "cpu_kind", "cpu_counts", "sensitivity_rows"]

MIN_SEEDS = 3
UNRECORDED = "unrecorded"
T = TypeVar("T")


def read_each_run(folder: Path, reader: Callable[[Path], T]) -> dict[str, T]:
    """``reader(run_dir)`` for every run ``runs.csv`` lists, from ``runs/`` or, in a packed study, from a
    temporary copy of ``runs.tar.xz`` (one extraction for every reader's needs)."""
    from layerscale.study.run.archive import is_packed, report_from_archive

    run_ids = [run["run_id"] for run in read_rows(folder / "runs.csv")]

    def read(study_dir: Path) -> dict[str, T]:
        return {run_id: reader(study_dir / "runs" / run_id) for run_id in run_ids}

    return report_from_archive(folder, read)[0] if is_packed(folder) else read(folder)


def cpu_kind(run_dir: Path) -> str:
    """``"<cpu>, <capability>"`` from the run's ``summary.json`` (``"unrecorded"`` without one or without both)."""
    try:
        environment = read_json_file(run_dir / "summary.json").get("environment")
    except (FileNotFoundError, UntrustedFileError):
        return UNRECORDED
    if not isinstance(environment, dict) or not environment.get("cpu") or not environment.get("cpu_capability"):
        return UNRECORDED
    return f"{environment['cpu']}, {environment['cpu_capability']}"


def _final_runs(folder: Path) -> list[dict]:
    return [run for run in read_rows(folder / "runs.csv") if run.get("kind", "final") == "final"]


def cpu_counts(folder: Path, kinds: dict[str, str]) -> dict[tuple[str, int], Counter]:
    """Per cell ``(method, depth)``: how many of its final runs ran on each CPU kind."""
    counts: dict[tuple[str, int], Counter] = {}
    for run in _final_runs(folder):
        counts.setdefault((run["method"], int(run["depth"])), Counter())[kinds[run["run_id"]]] += 1
    return counts


def _seed_kinds(folder: Path, kinds: dict[str, str]) -> dict[tuple[str, int, int], str]:
    """``(method, depth, seed) -> CPU kind`` over the final runs; ``ValueError`` when a cell ran one seed twice (at
    two rates: the design gives each cell one rate)."""
    out: dict[tuple[str, int, int], str] = {}
    for run in _final_runs(folder):
        key = (run["method"], int(run["depth"]), int(run["seed"]))
        if key in out:
            raise ValueError(f"{folder / 'runs.csv'}: {key[0]} at depth {key[1]} ran seed {key[2]} twice; "
                             "expected one final run per cell and seed")
        out[key] = kinds[run["run_id"]]
    return out


def _paired_on(kind: str, method: str, depth: int, cells: dict, reference: str, seed_kinds: dict) -> Interval | None:
    values, ref = cells.get((method, depth), {}), cells.get((reference, depth), {})
    seeds = [s for s in set(values) & set(ref)
             if seed_kinds.get((method, depth, s)) == kind and seed_kinds.get((reference, depth, s)) == kind]
    return paired_interval({s: values[s] for s in seeds}, {s: ref[s] for s in seeds})


def sensitivity_rows(root: Path, names: tuple[str, ...], kinds: dict[str, dict[str, str]]) -> list[dict]:
    """Each primary comparison of each confirmation folder ``root / name``, on each CPU kind its runs ran on:
    ``n`` (the fewest paired seeds it rests on), the difference and its 95 % interval, p and the interval's
    verdict, or ``fewer than 3 seeds`` with no interval."""
    metric = Metric.for_language_model(False)
    out = []
    for name in names:
        folder = root / name
        reference = read_json_file(folder / "study.json")["reference"]
        rows = read_results(folder / "results.csv")
        cells = {(r.method, r.depth): r.test_by_seed() for r in rows if r.table == "tuned"}
        seed_kinds = _seed_kinds(folder, kinds[name])
        for row in (r for r in rows if r.family == "primary"):
            depths = (row.depth_from, row.depth) if row.depth_from else (row.depth,)
            for kind in sorted(set(seed_kinds.values())):
                diffs = [_paired_on(kind, row.method, d, cells, reference, seed_kinds) for d in depths]
                n = min(d.n if d else 0 for d in diffs)
                result = {"study": name, "comparison": row.comparison, "cpu": kind, "n": n, "mean": "", "low": "",
                          "high": "", "p_raw": "", "verdict": f"fewer than {MIN_SEEDS} seeds"}
                if n >= MIN_SEEDS:
                    interval = (welch_interval(diffs[1], diffs[0]) if row.depth_from else
                                within_range(diffs[0], *metric.difference_range))
                    p = p_value(interval)
                    result.update(mean=interval.mean, low=interval.low, high=interval.high,
                                  p_raw="" if p is None else p, verdict=verdict(interval, metric.higher_is_better))
                out.append(result)
    return out
