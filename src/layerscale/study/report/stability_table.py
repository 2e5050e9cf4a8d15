"""A study's stability tables (docs/study.md, "Stability"): how each cell trains, not only where it ends.

Per cell (method × depth), from the runs the study already has, with the measures of
:mod:`layerscale.stats.stability`:

- **learning-rate window** (``tuning: grid`` only, where every rate ran the full budget over the cell's seeds): the
  rates tried whose mean *validation* score (the last evaluation, as the rate choice reads it) is within
  :func:`window_tolerance` of the best rate's, as the factor largest ÷ smallest; a rate where any seed diverged or
  has no score is outside it;
- **seed spread** at the chosen rate: the standard deviation of the test metric over the cell's seeds, with its 95 %
  chi-square interval (3 seeds or more);
- **spread ratio** against the reference method at the same depth (each at its chosen rate, paired by seed): the
  ratio, its 95 % percentile bootstrap interval over seeds (:data:`BOOTSTRAP_DRAWS` draws, generator seed
  :data:`BOOTSTRAP_SEED`) and the Pitman–Morgan p-value of equal spread;
- **divergences and loss spikes** over every run of the cell (every rate and seed, tuning runs included): runs the
  study marked ``diverged`` or that logged a non-finite training loss; spikes by Lightning's ``SpikeDetection`` rule
  (``runs.csv``, ``loss_spikes``), summed, with the number of runs that had one.

**Verdicts, in the study's Holm / BH frame** (:mod:`layerscale.study.report.verdicts`): the *stability family* is the
spread ratio of every ``METHOD@DEPTH`` comparison of the design's primary family (the same cells, the same depth),
adjusted by Holm; every other ratio is exploratory, adjusted by Benjamini–Hochberg. ``steadier`` / ``less steady``
when the adjusted p is below 0.05 and the ratio's interval excludes 1, ``within noise`` otherwise. A ratio whose
bootstrap interval has zero width (every draw gave the same ratio: the two arms move together seed for seed) is no
test, in no family, and reads ``no spread`` — the accuracy tables' rule for a zero-width interval.

The rows go to ``stability.csv`` beside ``results.csv``; :func:`stability_table_lines` prints them from the rows as
written or as read back (every number through ``float``), so ``results.md`` and docs/RESULTS.md print the same text.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...stats.intervals import ROUNDING
from ...stats.multiplicity import adjust
from ...stats.stability import (pitman_morgan, rate_window, seed_spread, spread_interval, spread_ratio)
from ..design.grid import StudySpec, format_lr
from ..design.metric import Metric
from .verdicts import ALPHA, PRIMARY, EXPLORATORY, primary_key

__all__ = ["STABILITY_FILE", "FIELDS", "BOOTSTRAP_DRAWS", "BOOTSTRAP_SEED", "NO_SPREAD", "window_tolerance",
           "ratio_columns", "stability_rows", "stability_verdict", "stability_table_lines", "stability_lines"]

STABILITY_FILE = "stability.csv"
BOOTSTRAP_DRAWS, BOOTSTRAP_SEED = 2000, 0
#: the verdict of a ratio whose bootstrap interval has zero width (no test; :func:`stability_rows`)
NO_SPREAD = "no spread"
FIELDS = ["method", "depth", "lr", "rates_tried", "window_tolerance", "window_best", "window_rates",
          "window_factor", "seeds", "spread", "spread_ci_low", "spread_ci_high", "reference_spread", "ratio",
          "ratio_ci_low", "ratio_ci_high", "ratio_draws", "p_raw", "p_adj", "family", "adjustment", "verdict",
          "runs", "diverged", "spikes", "runs_with_spike"]


def window_tolerance(metric: Metric) -> float:
    """The learning-rate window's tolerance, fixed before any window was read (docs/study.md): 1 point of accuracy
    for a classifier, 0.1 bits per byte for a language model — about 3 to 4 times the seed-to-seed standard
    deviation of a cell's final validation score in the committed studies (0.22 and 0.35 points, 0.027 bits per
    byte), so a rate outside the window is worse than the best by more than seed noise."""
    return 1.0 if metric.classification else 0.1


def stability_verdict(ratio: float | None, low: float | None, high: float | None, p_adj: float | None) -> str:
    """``steadier`` / ``less steady`` when ``p_adj`` is below :data:`ALPHA` and the interval ``[low, high]`` of the
    spread ratio excludes 1; ``within noise`` otherwise; ``""`` without a ratio."""
    if ratio is None or p_adj is None:
        return ""
    if p_adj < ALPHA and high is not None and high < 1.0:
        return "steadier"
    if p_adj < ALPHA and low is not None and low > 1.0:
        return "less steady"
    return "within noise"


def _window(spec: StudySpec, metric: Metric, runs: dict, method: str, depth: int, rates) -> dict:
    """The window columns of one cell (empty where the study has no full-budget grid or a rate is unfinished)."""
    if spec.tuning != "grid" or not rates:
        return {}
    means = {}
    for lr in rates:
        rs = [runs.get((method, depth, lr, seed)) for seed in spec.seeds_for(method, depth)]
        if any(r is None or r.status not in ("finished", "diverged") for r in rs):
            return {}  # a rate not finished yet: no window
        scores = [r.val_last for r in rs if r.status == "finished" and r.val_last is not None]
        means[lr] = math.fsum(scores) / len(scores) if len(scores) == len(rs) else math.nan
    if not any(math.isfinite(m) for m in means.values()):
        return {"rates_tried": ";".join(format_lr(lr) for lr in sorted(rates))}
    tolerance = window_tolerance(metric)
    window = rate_window(means, tolerance, metric.higher_is_better)
    return {"rates_tried": ";".join(format_lr(lr) for lr in sorted(rates)), "window_tolerance": tolerance,
            "window_best": window.best, "window_rates": ";".join(format_lr(lr) for lr in window.rates),
            "window_factor": window.ratio}


def _spread(values: dict[int, float]) -> dict:
    if len(values) < 2:
        return {"seeds": len(values)}
    row = {"seeds": len(values), "spread": seed_spread(list(values.values()))}
    if len(values) >= 3:
        row["spread_ci_low"], row["spread_ci_high"] = spread_interval(list(values.values()))
    return row


def ratio_columns(values: dict[int, float], reference: dict[int, float]) -> dict:
    """The ratio columns against the reference (``reference_spread``, ``ratio``, ``ratio_ci_low`` /
    ``ratio_ci_high``, ``ratio_draws``, and ``p_raw`` of Pitman–Morgan's test, or ``verdict`` :data:`NO_SPREAD`
    for a zero-width interval: no test), or none where they cannot be formed (fewer than 3 shared seeds, a reference
    without spread). The rule of every stability family: the study's table and the confirmatory report."""
    shared = sorted(set(values) & set(reference))
    if len(shared) < 3 or seed_spread([reference[s] for s in shared]) == 0:
        return {}
    ratio = spread_ratio(values, reference, draws=BOOTSTRAP_DRAWS, seed=BOOTSTRAP_SEED)
    row = {"reference_spread": seed_spread([reference[s] for s in shared]), "ratio": ratio.ratio,
           "ratio_ci_low": ratio.low, "ratio_ci_high": ratio.high, "ratio_draws": ratio.draws}
    if ratio.high - ratio.low <= ROUNDING * max(1.0, abs(ratio.high)):
        # every draw gave the same ratio: the arms move together seed for seed (one a linear function of the
        # other, e.g. 3 seeds with the same tie in both), so the resampling measures no noise and Pitman-Morgan's
        # correlation is ±1 by construction; as a zero-width interval in the accuracy tables: no test, no claim
        row["verdict"] = NO_SPREAD
        return row
    return {**row, "p_raw": pitman_morgan(values, reference)}


def stability_rows(spec: StudySpec, results: list, cells: list, rates: dict[tuple[str, int], tuple[float, ...]],
                   metric: Metric) -> list[dict]:
    """One row per cell (the grid's order; columns :data:`FIELDS`) from every run of the study (``results``:
    :class:`~layerscale.study.report.results.RunResult`, tuning runs included), the tuned table's cells
    (:class:`~layerscale.study.report.results.CellResult`: chosen rate and per-seed test values) and the rates each
    cell tried (``rates``; the tuning outcome's)."""
    finals = {(r.method, r.depth, r.lr, r.seed): r for r in results if r.kind == "final"}
    tuned = {(c.method, c.depth): c for c in cells if c.table == "tuned"}

    def per_seed(cell) -> dict[int, float]:
        return dict(zip(cell.seeds, cell.test.values)) if cell is not None and cell.test else {}

    primary = {(m, d) for kind, m, _, d in map(primary_key, spec.primary) if kind == "diff"}
    by_run = {r.run_id: r for r in results}  # each run once
    rows = []
    for method, depth in spec.cells():
        cell = tuned.get((method, depth))
        row = {"method": method, "depth": depth, "lr": cell.lr if cell else None}
        row.update(_window(spec, metric, finals, method, depth, rates.get((method, depth), tuple(spec.lrs))))
        values = per_seed(cell)
        row.update(_spread(values))
        if method != spec.reference_method:
            row.update(ratio_columns(values, per_seed(tuned.get((spec.reference_method, depth)))))
            if row.get("p_raw") is not None:
                row["family"] = PRIMARY if (method, depth) in primary else EXPLORATORY
        ran = [r for r in by_run.values() if r.method == method and r.depth == depth
               and (r.status != "pending" or r.steps > 0)]
        row.update(runs=len(ran), diverged=sum(r.status == "diverged" or r.nonfinite_loss for r in ran),
                   spikes=sum(r.loss_spikes for r in ran), runs_with_spike=sum(r.loss_spikes > 0 for r in ran))
        rows.append(row)
    for family, method in ((PRIMARY, "holm"), (EXPLORATORY, "bh")):
        members = [r for r in rows if r.get("family") == family]
        for r, p in zip(members, adjust([r["p_raw"] for r in members], method)):
            r.update(p_adj=p, adjustment=method,
                     verdict=stability_verdict(r["ratio"], r["ratio_ci_low"], r["ratio_ci_high"], p))
    return rows


# ---- printing ------------------------------------------------------------------------------------------------

def _num(value) -> float | None:
    """A number of a row as written (a float) or as read back from the CSV (its text); ``None`` when empty."""
    return None if value is None or value == "" else float(value)


def _p(value) -> str:
    p = _num(value)
    return "—" if p is None else "< 0.0001" if p < 1e-4 else f"{p:.3g}"


def _window_text(row: dict) -> str:
    factor = _num(row.get("window_factor"))
    if factor is None:
        return "—"
    rates = [float(x) for x in str(row["window_rates"]).split(";") if x]
    tried = len([x for x in str(row.get("rates_tried", "")).split(";") if x])
    span = f"{rates[0]:g}" if len(rates) == 1 else f"{rates[0]:g}–{rates[-1]:g}"
    return f"×{factor:.3g} ({span}; {len(rates)} of {tried})"


def _spread_text(row: dict, digits: int) -> str:
    spread = _num(row.get("spread"))
    if spread is None:
        return "—"
    low, high = _num(row.get("spread_ci_low")), _num(row.get("spread_ci_high"))
    if low is None:
        return f"{spread:.{digits}f} (n = {row['seeds']})"
    return f"{spread:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _ratio_text(row: dict) -> str:
    ratio = _num(row.get("ratio"))
    if ratio is None:
        return "—"
    return f"{ratio:.2f} [{_num(row['ratio_ci_low']):.2f}, {_num(row['ratio_ci_high']):.2f}]"


def stability_table_lines(rows: list[dict], reference: str, digits: int,
                          at: Callable[[int], str] = lambda d: f"depth {d}") -> list[str]:
    """The per-cell table and one sentence per family, from :func:`stability_rows`' rows (as written or read back
    from ``stability.csv``); ``digits``: decimals of the seed spread (one more than the study's metric prints)."""
    lines = [f"| cell | learning-rate window | seeds | seed SD [95 % CI] | SD ÷ {reference}'s [95 % bootstrap] | "
             "Pitman–Morgan p | adjusted p | verdict | diverged / runs | loss spikes (runs with one) |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for row in rows:
        primary = row.get("family") == PRIMARY
        verdict = (row.get("verdict") or ("reference" if row["method"] == reference else "—")) \
            + ("*" if primary else "")
        lines.append(f"| {row['method']} at {at(int(row['depth']))} | {_window_text(row)} | {row['seeds']} | "
                     f"{_spread_text(row, digits)} | {_ratio_text(row)} | {_p(row.get('p_raw'))} | "
                     f"{_p(row.get('p_adj'))} | {verdict} | {row['diverged']} / {row['runs']} | "
                     f"{row['spikes']} ({row['runs_with_spike']}) |")
    lines.append("")
    for family, name in ((PRIMARY, "Stability family (Holm-adjusted, marked *)"),
                         (EXPLORATORY, "Exploratory (Benjamini–Hochberg-adjusted)")):
        members = [r for r in rows if r.get("family") == family]
        if not members:
            continue
        groups = {k: [r for r in members if r.get("verdict") == k] for k in ("steadier", "less steady",
                                                                            "within noise")}
        parts = [f"{label}: " + ", ".join(f"{r['method']} at {at(int(r['depth']))}"
                                          + (f" (SD ratio {_ratio_text(r)}, adjusted p {_p(r['p_adj'])})"
                                             if k != "within noise" else "") for r in groups[k])
                 for k, label in (("steadier", f"steadier than {reference}"),
                                  ("less steady", f"less steady than {reference}"),
                                  ("within noise", f"seed spread within noise of {reference}'s")) if groups[k]]
        lines.append(f"- {name}, {len(members)} comparison{'s' if len(members) != 1 else ''}: "
                     + "; ".join(parts) + ".")
    flat = [r for r in rows if r.get("verdict") == NO_SPREAD]
    if flat:
        lines.append("- The bootstrap interval has zero width (every resample gave the same ratio: the two arms move "
                     "together seed for seed), so the noise cannot be estimated and no claim is made: "
                     + ", ".join(f"{r['method']} at {at(int(r['depth']))} (SD ratio {_ratio_text(r)})" for r in flat)
                     + ".")
    diverged = [r for r in rows if int(r["diverged"])]
    spiked = [r for r in rows if int(r["spikes"])]
    lines.append("- Divergences: " + (", ".join(f"{r['method']} at {at(int(r['depth']))} {r['diverged']} of "
                                               f"{r['runs']}" for r in diverged) if diverged else "none")
                 + "; loss spikes: " + (", ".join(f"{r['method']} at {at(int(r['depth']))} {r['spikes']} in "
                                                 f"{r['runs_with_spike']} run(s)" for r in spiked)
                                         if spiked else "none") + ".")
    return lines


def stability_lines(spec: StudySpec, rows: list[dict], metric: Metric) -> list[str]:
    """``results.md``'s "Stability" section: what each column measures (docs/study.md has the formulas and
    sources), the table and the verdict sentences."""
    tolerance = window_tolerance(metric)
    unit = (f"point{'s' if tolerance != 1 else ''} of accuracy" if metric.classification else "bits per byte")
    primary = [f"{m}@{d}" for m, d in ((r["method"], r["depth"]) for r in rows if r.get("family") == PRIMARY)]
    if spec.tuning == "grid":
        window = (f"the rates the cell tried whose mean validation score over its seeds at the full budget (the last "
                  f"evaluation, as the rate choice reads it) is within {tolerance:g} {unit} of the "
                  "best rate's, as the factor largest ÷ smallest rate (×1: the best rate alone), then the span and "
                  "how many of the rates tried it holds; a rate where any seed diverged is outside it")
    else:
        window = ("measured only when every rate ran the full budget over the cell's seeds (`--tuning grid`): this "
                  "study's rates were " + ("fixed by its design" if spec.fixed else "chosen at part of the budget")
                  + ", so the column is empty")
    family = (f"the spread ratio of each comparison of the primary family at its depth ({', '.join(primary)}), "
              "adjusted by Holm" if primary else "none (no primary comparison has a ratio yet)")
    return ["## Stability", "",
            "How each cell trains, not only where it ends (docs/study.md, \"Stability\", has each formula and its "
            "source). Learning-rate window: " + window + ". Seed SD: the standard deviation of the test metric over "
            "the cell's seeds at its chosen rate, with its 95 % chi-square interval (3 seeds or more). SD ÷ "
            f"{spec.reference_method}'s: the ratio to the reference's at the same depth, paired by seed, with a 95 % "
            f"percentile bootstrap interval over seeds ({BOOTSTRAP_DRAWS} draws, seeds resampled jointly); its p is "
            "the Pitman–Morgan test of equal spread. Verdicts in the study's frame: the stability family is "
            + family + "; every other ratio is exploratory (Benjamini–Hochberg); \"steadier\" or \"less steady\" "
            "when the adjusted p is below 0.05 and the ratio's interval excludes 1; \"no spread\" (no test, no "
            "claim) when the interval has zero width. Diverged: runs of the cell, "
            "every rate and seed (tuning runs included), that the study marked diverged or that logged a "
            "non-finite training loss. Loss spikes: training-loss records that are spikes by the rule of "
            "Lightning's `SpikeDetection` with its defaults (window 10, rtol 2.0), over the same runs.", "",
            *stability_table_lines(rows, spec.reference_method, metric.digits + 1), ""]
