"""The grow evidence's statistics (docs/results/grow/DESIGN.md, issue 29), from its committed CSVs alone.

Per source and arm — (a) continue the source, (b) grown and trained whole, (c) grown with only the new blocks
trained, (d) the grown shape from scratch — the rate is chosen by the mean validation score of its seeds at the
end of training (:func:`layerscale.study.run.tuning.choose_rate`: the best mean, one-standard-error ties toward 1e-3;
a diverged run scores worst). At that rate the test metric's mean over seeds carries its 95 % t-interval,
truncated to the metric's range. The comparisons:

- primary family (Holm, 4 comparisons): (b) − (a) and (c) − (a) per source, paired by seed (the arms share the
  source model, and a seed fixes the data order of the extra training);
- exploratory (Benjamini–Hochberg): (d) against (a), (b) and (c) by Welch's interval (arm (d) has its own models),
  and (b) − (c) paired.

Verdicts are :func:`layerscale.study.report.verdicts.verdict` of the adjusted p-value, read as "the first arm is
better / worse than the second", or within noise.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from layerscale.stats.intervals import Interval, mean_interval, p_value, paired_interval, welch_interval, within_range
from layerscale.stats.multiplicity import adjust_families
from layerscale.study.report.results import Metric
from layerscale.study.run.tuning import RateChoice, choose_rate
from layerscale.study.report.verdicts import verdict

__all__ = ["ARMS", "ARM_NAMES", "ENDED", "RESULT_FIELDS", "GrowAnalysis", "chosen_rates", "metric_of",
           "result_rows", "typed_runs", "validation_score"]

SHARED_LR = 1e-3   # the studies' rate: ties go toward it
ARMS = ("a", "b", "c", "d")
ARM_NAMES = {"a": "(a) continue the source", "b": "(b) grown, train all", "c": "(c) grown, new blocks only",
             "d": "(d) grown shape from scratch"}
PAIRED = {("b", "a"): "primary", ("c", "a"): "primary", ("b", "c"): "exploratory"}
WELCH = {("d", "a"): "exploratory", ("d", "b"): "exploratory", ("d", "c"): "exploratory"}
COMPARISONS = (("b", "a"), ("c", "a"), ("d", "a"), ("d", "b"), ("d", "c"), ("b", "c"))
ENDED = ("finished", "diverged")
RESULT_FIELDS = ["kind", "source", "arm", "comparison", "test", "family", "lr", "tied", "n", "mean", "low", "high",
                 "truncated", "p_raw", "p_adj", "verdict", "seeds", "values", "train_s"]


def _number(text: str | None) -> float | None:
    return None if text in ("", None) else float(text)


def typed_runs(rows: list[dict]) -> list[dict]:
    """runs.csv's rows (strings) with their numbers parsed (an empty field is ``None``)."""
    return [{"source": r["source"], "arm": r["arm"], "lr": float(r["lr"]), "seed": int(r["seed"]),
             "status": r["status"], "val": _number(r["val"]), "test": _number(r["test"]),
             "train_s": _number(r["train_s"]), "steps": None if r["steps"] == "" else int(r["steps"])}
            for r in rows]


def metric_of(classification: bool) -> Metric:
    """Test accuracy (%) for the image source, bits per byte for the language model."""
    return Metric.for_language_model(not classification)


def validation_score(row: dict, metric: Metric) -> float:
    """The run's validation score at the end, signed larger-is-better (``-inf``: diverged or never evaluated)."""
    if row["status"] != "finished" or row["val"] is None or not math.isfinite(row["val"]):
        return -math.inf
    return row["val"] if metric.higher_is_better else -row["val"]


def chosen_rates(rows: list[dict], classification: bool) -> dict[tuple[str, str], RateChoice]:
    """``{(source, arm): RateChoice}`` for every arm whose runs have all ended (finished or diverged) at every
    rate and seed: its per-seed validation scores into :func:`layerscale.study.run.tuning.choose_rate`."""
    metric = metric_of(classification)
    by_cell = defaultdict(list)
    for row in rows:
        by_cell[(row["source"], row["arm"])].append(row)
    chosen = {}
    for cell, cell_rows in by_cell.items():
        if any(r["status"] not in ENDED for r in cell_rows):
            continue
        rates = sorted({r["lr"] for r in cell_rows})
        seeds = sorted({r["seed"] for r in cell_rows})
        by_key = {(r["lr"], r["seed"]): r for r in cell_rows}
        if any((lr, s) not in by_key for lr in rates for s in seeds):
            continue
        per_seed = {lr: tuple(validation_score(by_key[(lr, s)], metric) for s in seeds) for lr in rates}
        chosen[cell] = choose_rate(per_seed, SHARED_LR, tuple(rates))
    return chosen


@dataclass
class Cell:
    """One arm of one source at its chosen rate: the test metric's interval over seeds, each seed's value and
    the runs."""
    interval: Interval | None
    values: dict[int, float]
    runs: list[dict]


@dataclass
class GrowAnalysis:
    """Everything the grow evidence's tables print, from the rows of sources.csv and runs.csv (typed by
    :func:`typed_runs`) and effective_depth.csv."""
    sources: list[dict]
    runs: list[dict]
    depths: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.metric = {s["source"]: metric_of(s["classification"] == "True") for s in self.sources}
        self.choice: dict[tuple[str, str], RateChoice] = {}
        for s in self.sources:
            self.choice.update(chosen_rates([r for r in self.runs if r["source"] == s["source"]],
                                            s["classification"] == "True"))
        self.cells: dict[tuple[str, str], Cell] = {}
        for (key, arm), choice in self.choice.items():
            rows = sorted((r for r in self.runs if r["source"] == key and r["arm"] == arm and r["lr"] == choice.lr),
                          key=lambda r: r["seed"])
            values = {r["seed"]: r["test"] for r in rows if r["test"] is not None}
            interval = within_range(mean_interval([values[s] for s in sorted(values)]), *self.metric[key].value_range)
            self.cells[(key, arm)] = Cell(interval, values, rows)
        self.comparisons = self._comparisons()

    def _comparisons(self) -> list[dict]:
        rows = []
        for s in self.sources:
            key, metric = s["source"], self.metric[s["source"]]
            for first, second in COMPARISONS:
                if (key, first) not in self.cells or (key, second) not in self.cells:
                    continue
                one, two = self.cells[(key, first)], self.cells[(key, second)]
                if (first, second) in PAIRED:
                    diff, how, family = paired_interval(one.values, two.values), "paired", PAIRED[(first, second)]
                else:
                    diff, how, family = welch_interval(one.interval, two.interval), "welch", WELCH[(first, second)]
                diff = within_range(diff, *metric.difference_range)
                rows.append({"source": key, "first": first, "second": second, "how": how, "family": family,
                             "diff": diff, "p_raw": p_value(diff), "metric": metric})
        adjust_families(rows, lambda row: row["family"] == "primary")
        for row in rows:
            row["verdict"] = verdict(row["diff"], row["metric"].higher_is_better, row.get("p_adj"))
        return rows

    @property
    def primary_count(self) -> int:
        """The number of primary comparisons the design fixes (2 per source)."""
        return sum(family == "primary" for family in PAIRED.values()) * len(self.sources)


def _interval_fields(interval: Interval | None) -> dict:
    if interval is None:
        return {}
    return {"n": interval.n, "mean": interval.mean, "low": interval.low, "high": interval.high,
            "truncated": interval.truncated}


def result_rows(analysis: GrowAnalysis) -> list[dict]:
    """results.csv's rows: one per arm at its chosen rate (``kind = cell``), one per comparison."""
    rows = []
    for (key, arm), cell in sorted(analysis.cells.items()):
        choice = analysis.choice[(key, arm)]
        seconds = [r["train_s"] for r in cell.runs if r["train_s"] is not None]
        rows.append({"kind": "cell", "source": key, "arm": arm, "lr": choice.lr,
                     "tied": " ".join(f"{lr:g}" for lr in choice.tied),
                     **_interval_fields(cell.interval), "seeds": " ".join(str(s) for s in sorted(cell.values)),
                     "values": " ".join(repr(cell.values[s]) for s in sorted(cell.values)),
                     "train_s": None if not seconds else round(sum(seconds) / len(seconds), 1)})
    for c in analysis.comparisons:
        rows.append({"kind": "comparison", "source": c["source"], "arm": c["first"],
                     "comparison": f"{c['first']}-{c['second']}", "test": c["how"], "family": c["family"],
                     **_interval_fields(c["diff"]), "p_raw": c["p_raw"], "p_adj": c.get("p_adj"),
                     "verdict": c["verdict"],
                     "values": "" if c["diff"] is None else " ".join(repr(v) for v in c["diff"].values)})
    return rows
