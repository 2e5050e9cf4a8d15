"""results.csv and results.md of the grow evidence (docs/results/grow/DESIGN.md) from its committed CSVs alone.

Every number is generated from ``sources.csv``, ``runs.csv`` and ``effective_depth.csv``: per source and arm the
rate chosen by the mean validation score of its seeds at the end (``layerscale.study.tuning.choose_rate``: the
study's one-standard-error ties toward 1e-3), the test metric at that rate, mean over seeds with its 95 %
t-interval (truncated to the metric's range), and the comparisons: (b) − (a) and (c) − (a) paired by seed (the
primary family, Holm over its 4 comparisons), (d) against (a), (b), (c) by Welch's interval and (b) − (c) paired
(exploratory, Benjamini–Hochberg). Verdicts use the adjusted p-value.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

from layerscale.study.formatting import TRUNCATION_NOTE, format_interval, format_p
from layerscale.study.intervals import mean_interval, paired_interval, p_value, welch_interval, within_range
from layerscale.study.multiplicity import adjust_families
from layerscale.study.results import Metric
from layerscale.study.tuning import choose_rate, mean_score

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


def _number(text):
    if text in ("", None):
        return None
    return float(text)


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _typed_runs(rows: list[dict]) -> list[dict]:
    return [{"source": r["source"], "arm": r["arm"], "lr": float(r["lr"]), "seed": int(r["seed"]),
             "status": r["status"], "val": _number(r["val"]), "test": _number(r["test"]),
             "train_s": _number(r["train_s"]), "steps": None if r["steps"] == "" else int(r["steps"])}
            for r in rows]


def metric_of(classification: bool) -> Metric:
    return Metric.for_language_model(not classification)


def _score(row: dict, metric: Metric) -> float:
    """The run's validation score at the end, signed larger-is-better (``-inf``: diverged or never evaluated)."""
    if row["status"] != "finished" or row["val"] is None or not math.isfinite(row["val"]):
        return -math.inf
    return row["val"] if metric.higher_is_better else -row["val"]


def chosen_rates(rows: list[dict], classification: bool) -> dict:
    """``{(source, arm): RateChoice}`` for every arm whose runs have all ended (finished or diverged): its rates'
    per-seed validation scores into :func:`layerscale.study.tuning.choose_rate`."""
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
        per_seed = {lr: tuple(_score(by_key[(lr, s)], metric) for s in seeds) for lr in rates}
        chosen[cell] = choose_rate(per_seed, SHARED_LR, tuple(rates))
    return chosen


class Analysis:
    """Everything the tables print, from the typed CSV rows."""

    def __init__(self, sources: list[dict], runs: list[dict], depths: list[dict]):
        self.sources = sources
        self.runs = runs
        self.depths = depths
        self.metric = {s["source"]: metric_of(s["classification"] == "True") for s in sources}
        self.choice = {}
        for s in sources:
            self.choice.update(chosen_rates([r for r in runs if r["source"] == s["source"]],
                                            s["classification"] == "True"))
        self.cells = {}       # (source, arm) -> (Interval, {seed: value}, [rows])
        for (key, arm), choice in self.choice.items():
            rows = sorted((r for r in runs if r["source"] == key and r["arm"] == arm and r["lr"] == choice.lr),
                          key=lambda r: r["seed"])
            values = {r["seed"]: r["test"] for r in rows if r["test"] is not None}
            low, high = self.metric[key].value_range
            self.cells[(key, arm)] = (within_range(mean_interval([values[s] for s in sorted(values)]), low, high),
                                      values, rows)
        self.comparisons = []
        for s in sources:
            key, metric = s["source"], self.metric[s["source"]]
            for first, second in COMPARISONS:
                if (key, first) not in self.cells or (key, second) not in self.cells:
                    continue
                one, two = self.cells[(key, first)], self.cells[(key, second)]
                if (first, second) in PAIRED:
                    diff, how, family = paired_interval(one[1], two[1]), "paired", PAIRED[(first, second)]
                else:
                    diff, how, family = welch_interval(one[0], two[0]), "welch", WELCH[(first, second)]
                diff = within_range(diff, *metric.difference_range)
                self.comparisons.append({"source": key, "first": first, "second": second, "how": how,
                                         "family": family, "diff": diff, "p_raw": p_value(diff), "metric": metric})
        adjust_families(self.comparisons, lambda row: row["family"] == "primary")
        for row in self.comparisons:
            row["verdict"] = verdict(row)


def verdict(row: dict) -> str:
    diff = row["diff"]
    if diff is None or diff.low is None:
        return "no interval"
    if diff.std == 0:
        return "no spread"
    if row.get("p_adj") is not None and row["p_adj"] < 0.05:
        better = (diff.mean > 0) == row["metric"].higher_is_better
        return f"({row['first']}) {'better' if better else 'worse'}"
    return "within noise"


def _f(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _join(values, digits: int) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def _result_rows(analysis: Analysis) -> list[dict]:
    rows = []
    for (key, arm), (interval, values, runs) in sorted(analysis.cells.items()):
        choice = analysis.choice[(key, arm)]
        seconds = [r["train_s"] for r in runs if r["train_s"] is not None]
        rows.append({"kind": "cell", "source": key, "arm": arm, "lr": choice.lr,
                     "tied": " ".join(f"{lr:g}" for lr in choice.tied),
                     **_interval_fields(interval), "seeds": " ".join(str(s) for s in sorted(values)),
                     "values": " ".join(repr(values[s]) for s in sorted(values)),
                     "train_s": None if not seconds else round(sum(seconds) / len(seconds), 1)})
    for c in analysis.comparisons:
        rows.append({"kind": "comparison", "source": c["source"], "arm": c["first"],
                     "comparison": f"{c['first']}-{c['second']}", "test": c["how"], "family": c["family"],
                     **_interval_fields(c["diff"]), "p_raw": c["p_raw"], "p_adj": c.get("p_adj"),
                     "verdict": c["verdict"],
                     "values": "" if c["diff"] is None else " ".join(repr(v) for v in c["diff"].values)})
    return rows


def _interval_fields(interval) -> dict:
    if interval is None:
        return {}
    return {"n": interval.n, "mean": interval.mean, "low": interval.low, "high": interval.high,
            "truncated": interval.truncated}


def _csv_text(rows: list[dict], fields: list[str]) -> str:
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else (repr(row[k]) if isinstance(row[k], float) else row[k]))
                         for k in fields})
    return buffer.getvalue()


def _sources_section(sources: list[dict]) -> list[str]:
    lines = ["## The sources", "",
             "Each source is the committed run retrained from its recorded config (a new draw of the same recipe, "
             "DESIGN.md's addendum) and grown with `layerscale grow --insert L --where every:1 --init copy "
             "--gamma 0`. Test metric of the committed run (runs.csv of its study) and of the retrain; the "
             "retrain's and the grown model's mean loss (nats) and accuracy on the whole test split before any "
             "training, which must agree: the same accuracy and the loss within 1e-6 of itself (the blocks see "
             "bitwise the same inputs; the CPU's kernels may round a last bit differently, "
             "scripts/grow_evidence.py `IDENTITY_RTOL`).", "",
             "| source | run | steps | training seconds | committed test | retrained test | test loss: source / "
             "grown (difference) | test accuracy: source / grown | identical |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in sources:
        digits = metric_of(s["classification"] == "True").digits + 1
        lines.append(f"| {s['source']} (depth {s['depth']} → {2 * int(s['depth'])}) | {s['study']} "
                     f"`{s['run_id']}` | {s['steps']} | {_f(_number(s['train_s']), 0)} | "
                     f"{_f(_number(s['committed_test']), digits)} | {_f(_number(s['retrained_test']), digits)} | "
                     f"{float(s['source_loss']):.6f} / {float(s['grown_loss']):.6f} "
                     f"({float(s['loss_difference']):+.1e}) | "
                     f"{float(s['source_accuracy']):.6f} / {float(s['grown_accuracy']):.6f} | {s['identical']} |")
    return lines + [""]


def _rates_section(analysis: Analysis) -> list[str]:
    lines = ["## Rate choice", "",
             "Mean validation score at the end of each rate's seeds (accuracy % / bits per byte); the chosen "
             "rate is the best mean, or among the rates within one standard error of it (paired by seed) the "
             "one nearest 1e-3 (`layerscale.study.tuning.choose_rate`). A diverged run scores worst.", "",
             "| source | arm | " + "validation per rate | chosen | tied |", "|---|---|---|---|---|"]
    for s in analysis.sources:
        key, metric = s["source"], analysis.metric[s["source"]]
        for arm in ARMS:
            rows = [r for r in analysis.runs if r["source"] == key and r["arm"] == arm]
            if not rows:
                continue
            parts = []
            for lr in sorted({r["lr"] for r in rows}):
                scores = [_score(r, metric) for r in sorted(rows, key=lambda r: r["seed"]) if r["lr"] == lr]
                ended = all(r["status"] in ENDED for r in rows if r["lr"] == lr)
                mean = mean_score(scores)
                text = ("pending" if not ended else "diverged" if mean == -math.inf
                        else f"{(mean if metric.higher_is_better else -mean):.{metric.digits + 1}f}")
                parts.append(f"{lr:g}: {text}")
            choice = analysis.choice.get((key, arm))
            lines.append(f"| {key} | {ARM_NAMES[arm]} | {'; '.join(parts)} | "
                         f"{'—' if choice is None else f'{choice.lr:g}'} | "
                         f"{'—' if choice is None or not choice.is_tie else ', '.join(f'{lr:g}' for lr in choice.tied)} |")
    return lines + [""]


def _results_section(analysis: Analysis) -> list[str]:
    lines = ["## Test metric at the chosen rate", "",
             "Per source and arm at its chosen rate: the test metric, mean over seeds 0–2 with its 95 % "
             "t-interval (accuracy truncated to [0, 100]), each seed's value, and each run's training seconds and "
             "steps (equal steps, not equal FLOPs: a step of a grown model costs about twice one of the "
             "source).", "",
             "| source | arm | rate | test | per seed | training seconds per seed | steps |",
             "|---|---|---|---|---|---|---|"]
    for s in analysis.sources:
        key, metric = s["source"], analysis.metric[s["source"]]
        for arm in ARMS:
            if (key, arm) not in analysis.cells:
                continue
            interval, values, runs = analysis.cells[(key, arm)]
            lines.append(f"| {key} ({metric.name}) | {ARM_NAMES[arm]} | {analysis.choice[(key, arm)].lr:g} | "
                         f"{format_interval(interval, metric.digits)} | "
                         f"{_join([values[x] for x in sorted(values)], metric.digits + 1)} | "
                         f"{', '.join(_f(r['train_s'], 0) for r in runs)} | "
                         f"{', '.join('—' if r['steps'] is None else str(r['steps']) for r in runs)} |")
    return lines + [""]


def _comparison_section(analysis: Analysis) -> list[str]:
    lines = ["## Comparisons", "",
             "Primary family (fixed in DESIGN.md, Holm over its 4 comparisons): (b) − (a) and (c) − (a) per "
             "source, paired by seed. Exploratory (Benjamini–Hochberg over the rest): (d) against (a), (b), (c) "
             "by Welch's interval, (b) − (c) paired. Differences in points of accuracy / bits per byte (lower is "
             "better); the verdict uses the adjusted p-value, and a comparison not significant after adjustment "
             "is within noise.", "",
             "| family | source | comparison | test | difference (95 % interval) | per seed | p | p adjusted | "
             "verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for row in sorted(analysis.comparisons, key=lambda r: r["family"] != "primary"):
        diff, digits = row["diff"], row["metric"].digits + 1
        seeds = "—" if diff is None or not diff.values or row["how"] != "paired" else _join(diff.values, digits)
        lines.append(f"| {'primary (Holm)' if row['family'] == 'primary' else 'exploratory (BH)'} | {row['source']} | "
                     f"({row['first']}) − ({row['second']}) | {row['how']} | {format_interval(diff, digits, True)} | "
                     f"{seeds} | {format_p(row['p_raw'])} | {format_p(row.get('p_adj'))} | {row['verdict']} |")
    return lines + [""]


def _depth_section(analysis: Analysis) -> list[str]:
    lines = ["## Effective depth", "",
             "`D_δ` (docs/analysis.md; `layerscale.analysis.analyze_run` with its defaults, δ = 0.01 nats, on at "
             "most 2,000 test examples) of the source and of every final model at its arm's chosen rate: per "
             "model `D_δ` with its bootstrap interval, per arm the mean over seeds with its 95 % t-interval "
             "(truncated to [0, depth]).", "",
             "| source | model | depth | mean over seeds | per seed: D_δ (bootstrap interval) |", "|---|---|---|---|---|"]
    by_key = defaultdict(list)
    for d in analysis.depths:
        by_key[(d["source"], d["arm"])].append(d)
    for s in analysis.sources:
        for arm in ("source",) + ARMS:
            rows = sorted(by_key.get((s["source"], arm), []), key=lambda d: -1 if d["seed"] == "" else int(d["seed"]))
            if not rows:
                continue
            depth = int(rows[0]["depth"])
            values = [float(d["effective_depth"]) for d in rows]
            cell = within_range(mean_interval(values), 0.0, depth) if len(values) > 1 else None
            per = "; ".join(f"{int(float(d['effective_depth']))} ({float(d['low']):g}–{float(d['high']):g})"
                            for d in rows)
            name = "source" if arm == "source" else f"{ARM_NAMES[arm]} at {float(rows[0]['lr']):g}"
            lines.append(f"| {s['source']} | {name} | {depth} | {format_interval(cell, 1) if cell else '—'} | "
                         f"{per} |")
    return lines + [""]


def write_report(out: Path) -> None:
    """results.csv and results.md from sources.csv, runs.csv and effective_depth.csv in ``out``."""
    out = Path(out)
    sources = _read(out / "sources.csv")
    runs = _typed_runs(_read(out / "runs.csv"))
    depths = _read(out / "effective_depth.csv")
    analysis = Analysis(sources, runs, depths)
    ended = sum(r["status"] in ENDED for r in runs)
    lines = ["# Growing a trained model deeper", "",
             "<!-- generated by scripts/grow_evidence.py from sources.csv, runs.csv and effective_depth.csv; "
             "do not edit -->", "",
             f"Design: DESIGN.md (fixed before the runs). {len(sources)} sources; {ended} of {len(runs)} runs of "
             f"the arms ended ({sum(r['status'] == 'diverged' for r in runs)} diverged). The extra budget E of "
             "every arm is the source's step count; test metrics are reported only at each arm's chosen rate.", ""]
    lines += _sources_section(sources) + _rates_section(analysis) + _results_section(analysis)
    lines += _comparison_section(analysis) + _depth_section(analysis) + [TRUNCATION_NOTE, ""]
    for name, text in (("results.csv", _csv_text(_result_rows(analysis), RESULT_FIELDS)),
                       ("results.md", "\n".join(lines))):
        tmp = out / f"{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out / name)
