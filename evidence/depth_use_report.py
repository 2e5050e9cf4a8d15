"""results.md of the depth-use evidence (docs/results/depth-use/DESIGN.md, run by scripts/depth_use.py) from its
committed CSVs alone, and the same tables for docs/RESULTS.md (:func:`depth_use_sections`).

Every number is generated from ``models.csv``, ``effective_depth.csv`` and ``pruning.csv``: per method, the mean
over seeds with its 95 % t-interval truncated to the count's range (``layerscale.stats.intervals``), the per-seed
values, and differences against Pre-LN by Welch's interval (different models, not paired), Holm-adjusted over the
design's primary family of two comparisons and Benjamini–Hochberg over every other (exploratory) comparison.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from layerscale.atomic_io import write_text_atomic
from layerscale.study.run.csv_rows import read_rows
from layerscale.study.report.formatting import TRUNCATION_NOTE, format_interval, format_p
from layerscale.stats.intervals import mean_interval, p_value, welch_interval, within_range
from layerscale.stats.multiplicity import adjust_families

DEPTH = 12
DELTAS = (0.01, 0.05, 0.2)
PRIMARY_DELTA = 0.05
REMOVABLE_DELTAS = (0.05, 0.2)
METHODS = ("prenorm", "postnorm", "layerscale", "layerscale_head", "rezero", "deepnorm", "lns", "dyt")
CRITERIA = ("angular", "block_influence", "ablation", "gamma")
REFERENCE = "prenorm"
PRIMARY = {("effective depth", PRIMARY_DELTA, "angular", "layerscale"),
           ("removable", PRIMARY_DELTA, "ablation healed", "layerscale")}


def _cell(values: list[float], high: float):
    return within_range(mean_interval(values), 0.0, high)


def _per_seed(values: list[float], digits: int = 0) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


class _Comparisons:
    """Differences against Pre-LN, with raw and adjusted p-values (Holm: primary; BH: the rest)."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, what: str, delta: float, variant: str, method: str, diff) -> dict:
        row = {"what": what, "delta": delta, "variant": variant, "method": method, "diff": diff,
               "primary": (what, delta, variant, method) in PRIMARY, "p_raw": p_value(diff)}
        self.rows.append(row)
        return row

    def adjust(self) -> None:
        adjust_families(self.rows, lambda row: row["primary"])


def _verdict(row: dict) -> str:
    diff = row["diff"]
    if diff is None or diff.low is None:
        return "no interval"
    if diff.std == 0:
        return "no spread"
    if row.get("p_adj") is not None and row["p_adj"] < 0.05:
        return "higher" if diff.mean > 0 else "lower"
    return "within noise"


def _models_section(models: list[dict]) -> list[str]:
    lines = ["## The models", "",
             "Retrained from the Fashion-MNIST study's committed configs (same recipe; not bitwise the committed "
             "runs, see DESIGN.md). Test accuracy (%) on the full test split, per seed 0, 1, 2:", "",
             "| method | rate | committed | retrained | training seconds |", "|---|---|---|---|---|"]
    by_method = defaultdict(list)
    for m in models:
        by_method[m["method"]].append(m)
    for method in METHODS:
        rows = sorted(by_method.get(method, []), key=lambda m: int(m["seed"]))
        if not rows:
            continue
        lines.append(f"| {method} | {float(rows[0]['lr']):g} | "
                     f"{_per_seed([float(m['committed_test']) for m in rows], 2)} | "
                     f"{_per_seed([float(m['retrained_test']) for m in rows], 2)} | "
                     f"{_per_seed([float(m['train_s']) for m in rows])} |")
    return lines + [""]


def _depth_section(depths: list[dict], comparisons: _Comparisons) -> list[str]:
    values = defaultdict(list)
    for r in sorted(depths, key=lambda r: int(r["seed"])):
        values[(r["method"], float(r["delta"]), r["spans"])].append(r)
    variants = [(d, "angular") for d in DELTAS] + [(PRIMARY_DELTA, "exhaustive")]
    lines = ["## Effective depth per method", "",
             f"`D_δ` (docs/analysis.md) of each depth-{DEPTH} model on 2,000 test images; per method the mean over "
             "seeds with its 95 % t-interval (truncated to [0, 12]), then each seed's `D_δ` with its bootstrap "
             "interval over the examples. Difference: against Pre-LN, Welch's 95 % interval.", ""]
    header = " | ".join(f"`D_{d:g}` ({spans} spans)" for d, spans in variants)
    lines += [f"| method | {header} |", "|---|" + "---|" * len(variants)]
    for method in METHODS:
        cells = []
        for delta, spans in variants:
            rs = values.get((method, delta, spans), [])
            if not rs:
                cells.append("—")
                continue
            cell = _cell([float(r["effective_depth"]) for r in rs], DEPTH)
            seeds = "; ".join(f"{int(r['effective_depth'])} ({float(r['low']):g}–{float(r['high']):g})" for r in rs)
            cells.append(f"{format_interval(cell, 1)} — seeds {seeds}")
            reference = values.get((REFERENCE, delta, spans), [])
            if method != REFERENCE and reference:
                diff = welch_interval(mean_interval([float(r["effective_depth"]) for r in rs]),
                                      mean_interval([float(r["effective_depth"]) for r in reference]))
                comparisons.add("effective depth", delta, spans, method, diff)
        if any(c != "—" for c in cells):
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines + [""]


def _removable(rows: list[dict], delta: float, healed: bool) -> int:
    """The largest n (on the grid measured) whose test loss is within δ of the unpruned, unhealed model's."""
    clean = next(float(r["loss"]) for r in rows if r["removed"] == "0" and r["healed"] == "False")
    grid = [r for r in rows if (r["healed"] == "True") == healed and r["criterion"] != "none"]
    within = [int(r["removed"]) for r in grid if float(r["loss"]) - clean <= delta]
    return max(within, default=0)


def _pruning_rows(pruning: list[dict], comparisons: _Comparisons) -> list[tuple]:
    """``(δ, criterion, healed, cells, comparison row or None)`` per table line; the comparisons registered."""
    by_model = defaultdict(list)
    for r in pruning:
        by_model[(r["method"], int(r["seed"]))].append(r)
    table = []
    for delta in REMOVABLE_DELTAS:
        for criterion in CRITERIA:
            for healed in (False, True):
                cells, counts = [], {}
                for method in ("prenorm", "layerscale"):
                    seeds = sorted(s for (m, s) in by_model if m == method)
                    rows = [[r for r in by_model[(method, s)] if r["criterion"] in (criterion, "none")]
                            for s in seeds]
                    rows = [rs for rs in rows if any(r["criterion"] == criterion for r in rs)]
                    if not rows:
                        cells.append("—")
                        continue
                    counts[method] = [float(_removable(rs, delta, healed)) for rs in rows]
                    cells.append(f"{format_interval(_cell(counts[method], DEPTH - 1), 1)} — seeds "
                                 f"{_per_seed(counts[method])}")
                if all(c == "—" for c in cells):
                    continue
                row = None
                if len(counts) == 2:
                    diff = welch_interval(mean_interval(counts["layerscale"]), mean_interval(counts["prenorm"]))
                    row = comparisons.add("removable", delta, f"{criterion} {'healed' if healed else 'unhealed'}",
                                          "layerscale", diff)
                table.append((delta, criterion, healed, cells, row))
    return table


def _pruning_section(table: list[tuple]) -> list[str]:
    lines = ["## Pruning: blocks removable within δ", "",
             "The largest number of blocks `layerscale prune` removes (blocks scored on the validation split, "
             "judged on 2,000 test images) while the test loss stays within δ nats of the unpruned model's: "
             "without healing (n = 0 … 11) and after healing 169 steps (n ∈ {1, 2, 3, 4, 6, 8}). Mean over seeds "
             "with its 95 % t-interval (truncated to [0, 11]) and the per-seed counts; the difference with "
             "Welch's interval and its adjusted p-value (see the comparisons). A healed count of 8 is the "
             "healed grid's largest n, so it reads \"at least 8\"; the healed counts are measured against the "
             "unpruned model before healing, and the healing alone moves the loss too (the control row of the "
             "next table).", ""]
    for delta in REMOVABLE_DELTAS:
        lines += [f"δ = {delta:g} nats:", "",
                  "| criterion | healing | prenorm | layerscale | layerscale − prenorm |", "|---|---|---|---|---|"]
        for row_delta, criterion, healed, cells, row in table:
            if row_delta != delta:
                continue
            diff = "—" if row is None else (f"{format_interval(row['diff'], 1, True)}, p adj. "
                                            f"{format_p(row.get('p_adj'))}: {_verdict(row)}")
            lines.append(f"| {criterion} | {'169 steps' if healed else 'none'} | {' | '.join(cells)} | {diff} |")
        lines.append("")
    return lines


def _curve_section(pruning: list[dict]) -> list[str]:
    by_key = defaultdict(list)
    clean = {}
    for r in pruning:
        if r["removed"] == "0" and r["healed"] == "False":
            clean[(r["method"], r["seed"])] = float(r["loss"])
    for r in pruning:
        if (r["method"], r["seed"]) not in clean:  # a model whose first criterion is still running
            continue
        key = (r["method"], r["criterion"], r["healed"] == "True", int(r["removed"]))
        by_key[key].append(float(r["loss"]) - clean[(r["method"], r["seed"])])
    grid = (1, 2, 3, 4, 6, 8)
    lines = ["## Test loss after pruning", "",
             "Δ test loss (nats) against the unpruned, unhealed model, mean over seeds with its 95 % t-interval; "
             "`none` healed is the unpruned model fine-tuned the same 169 steps (the healing's own effect).", "",
             "| method | criterion | healing | " + " | ".join(f"n = {n}" for n in grid) + " |",
             "|---|---|---|" + "---|" * len(grid)]
    for method in ("prenorm", "layerscale"):
        control = by_key.get((method, "none", True, 0))
        if control:
            lines.append(f"| {method} | none (control) | 169 steps | {format_interval(mean_interval(control), 3, True)}"
                         + " |" * len(grid))
        for criterion in CRITERIA:
            for healed in (False, True):
                values = [by_key.get((method, criterion, healed, n)) for n in grid]
                if not any(values):
                    continue
                lines.append(f"| {method} | {criterion} | {'169 steps' if healed else 'none'} | "
                             + " | ".join(format_interval(mean_interval(v), 3, True) if v else "—" for v in values)
                             + " |")
    return lines + [""]


def _comparison_section(comparisons: _Comparisons) -> list[str]:
    lines = ["## Comparisons against Pre-LN", "",
             "Primary family (fixed in DESIGN.md, Holm over its 2 comparisons): LayerScale − Pre-LN in `D_0.05` "
             "and in the blocks removable within 0.05 nats after healing by `ablation`. Every other row is "
             "exploratory (Benjamini–Hochberg over the rest). Verdicts use the adjusted p-value; an interval "
             "that includes zero is within noise.", "",
             "| family | measure | δ | variant | method | difference (95 % interval) | p | p adjusted | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in sorted(comparisons.rows, key=lambda r: (not r["primary"],)):
        lines.append(f"| {'primary (Holm)' if row['primary'] else 'exploratory (BH)'} | {row['what']} | "
                     f"{row['delta']:g} | {row['variant']} | {row['method']} | "
                     f"{format_interval(row['diff'], 2, True)} | {format_p(row['p_raw'])} | "
                     f"{format_p(row.get('p_adj'))} | {_verdict(row)} |")
    return lines + [""]


def depth_use_sections(out: Path, level: str = "##") -> list[str]:
    """The report's sections (models, effective depth, pruning, loss curves, comparisons) from the CSVs in
    ``out``, with headings at ``level``; what results.md and docs/RESULTS.md print."""
    models = read_rows(out / "models.csv")
    depths = read_rows(out / "effective_depth.csv")
    pruning = read_rows(out / "pruning.csv")
    comparisons = _Comparisons()
    lines = [f"{len(models)} of 24 models finished.", ""]
    lines += _models_section(models)
    lines += _depth_section(depths, comparisons)
    table = _pruning_rows(pruning, comparisons) if pruning else []
    comparisons.adjust()
    lines += (_pruning_section(table) if table else []) + (_curve_section(pruning) if pruning else [])
    lines += _comparison_section(comparisons) + [TRUNCATION_NOTE, ""]
    return [level + line[2:] if line.startswith("## ") else line for line in lines]


def primary_glance(out: Path) -> str | None:
    """One line with the primary family's Holm-adjusted verdicts (docs/RESULTS.md's "At a glance"); ``None``
    before both primary comparisons have their models."""
    comparisons = _Comparisons()
    _depth_section(read_rows(out / "effective_depth.csv"), comparisons)
    pruning = read_rows(out / "pruning.csv")
    if pruning:
        _pruning_rows(pruning, comparisons)
    comparisons.adjust()
    primary = [r for r in comparisons.rows if r["primary"]]
    if len(primary) < len(PRIMARY):
        return None
    names = {"effective depth": f"effective depth `D_{PRIMARY_DELTA:g}`",
             "removable": f"blocks removable within {PRIMARY_DELTA:g} nats after healing (ablation criterion)"}
    parts = [f"{names[r['what']]} {format_interval(r['diff'], 2, True)} blocks: **{_verdict(r)}** "
             f"(Holm-adjusted p {format_p(r.get('p_adj'))})" for r in primary]
    return (f"- Depth use and pruning of the Fashion-MNIST depth-12 models, layerscale against prenorm, primary "
            f"family of {len(primary)} comparison(s): " + "; ".join(parts) + ".")


def write_report(out: Path) -> None:
    """``out/results.md`` from the CSVs in ``out`` (temporary file, then rename)."""
    lines = ["# Depth use and pruning of the Fashion-MNIST depth-12 models", "",
             "<!-- generated by scripts/depth_use.py from models.csv, effective_depth.csv and pruning.csv; "
             "do not edit -->", "", "Design: DESIGN.md (fixed before the runs)."]
    lines += depth_use_sections(out)
    write_text_atomic(out / "results.md", "\n".join(lines))
