"""results.csv and results.md of a held-out check (``scripts/heldout_check.py``; issue 26, item 5), and its block on
docs/RESULTS.md, generated from the check's ``check.json`` (the study's choice and comparison row, the changed keys,
the budget, the held-out data) and ``runs.csv`` alone.

The held-out comparison is one pre-registered comparison — the study's primary comparison of one cell, trained again
on data the study did not use — so its verdict uses its raw p-value, with no multiplicity adjustment
(:func:`layerscale.study.report.verdicts.verdict`), and is read against the study's Holm-adjusted verdict of the same cell
as the redo designs' addenda of 2026-12-01 17:10 UTC say (:func:`reading`).

**Equal rates** (issue 60; each redo's DESIGN.md addendum of 2026-12-06): the pre-registered comparison pits each
method at its own chosen rate, so a difference there may be partly the rate's. A check whose ``check.json`` lists
``equal_rates`` (each a rate both methods run at: the reference's chosen rate and the compared method's) also
compares the two methods at each of those rates, seed by seed (:func:`equal_rate_comparisons`), beside the
pre-registered reading and read by the same rule. An equal-rate comparison whose rates are the chosen ones (both
methods chose the same rate) is the pre-registered comparison itself: it says so and is counted once. The others
form a family of their own, adjusted by Holm (two comparisons when the methods chose different rates); the
pre-registered comparison's verdict is unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from layerscale.atomic_io import write_text_atomic
from layerscale.study.run.csv_rows import csv_text, read_rows
from layerscale.study.report.formatting import TRUNCATION_NOTE, format_interval, format_p
from layerscale.stats.intervals import mean_interval, p_value, paired_interval, within_range
from layerscale.study.report.results import Metric
from layerscale.study.report.results_table import row_interval
from layerscale.study.report.verdicts import verdict as verdict_of

__all__ = ["CHECK_FILE", "RUN_FIELDS", "RESULT_FIELDS", "read_runs", "heldout_comparison", "equal_rate_comparisons",
           "result_rows", "reading", "report_text", "sections", "equal_rate_lines", "heldout_sections", "write_report"]

CHECK_FILE = "check.json"
RUN_FIELDS = ["method", "lr", "seed", "status", "val", "test", "train_s", "steps"]
RESULT_FIELDS = ["kind", "source", "data", "method", "reference", "depth", "lr", "reference_lr", "n", "mean", "low",
                 "high", "truncated", "p_raw", "p_adj", "adjustment", "verdict", "values", "bootstrap_low",
                 "bootstrap_high"]


def _number(text):
    return None if text in ("", None) else float(text)


def read_runs(path: Path) -> list[dict]:
    """``runs.csv`` of a held-out check, typed (missing numbers as ``None``)."""
    return [{"method": r["method"], "lr": float(r["lr"]), "seed": int(r["seed"]), "status": r["status"],
             "val": _number(r["val"]), "test": _number(r["test"]), "train_s": _number(r["train_s"]),
             "steps": None if r["steps"] == "" else int(r["steps"])} for r in read_rows(path)]


def _tests(runs: list[dict], method: str, lr: float) -> dict[int, float]:
    return {r["seed"]: r["test"] for r in runs if r["method"] == method and r["lr"] == lr and r["test"] is not None}


def _chosen(check: dict, runs: list[dict]) -> list[dict]:
    """The runs of the pre-registered comparison: each method at its own chosen rate."""
    return [r for r in runs if r["lr"] == check["rates"].get(r["method"])]


def heldout_comparison(check: dict, runs: list[dict]):
    """Per method the test metric over seeds (mean and t-interval, truncated to the metric's range) and the paired
    difference compared − reference over the seeds both finished, with its raw p-value and verdict (one
    pre-registered comparison: no adjustment), each method at its own chosen rate."""
    metric = Metric.for_language_model(not check["classification"])
    tests = {m: _tests(runs, m, check["rates"][m]) for m in (check["reference"], check["method"])}
    cells = {m: within_range(mean_interval([v for _, v in sorted(t.items())]), *metric.value_range)
             for m, t in tests.items()}
    diff = within_range(paired_interval(tests[check["method"]], tests[check["reference"]]), *metric.difference_range)
    p = p_value(diff)
    paired = sorted(set(tests[check["method"]]) & set(tests[check["reference"]]))
    return metric, tests, cells, diff, p, verdict_of(diff, metric.higher_is_better), paired


def equal_rate_comparisons(check: dict, runs: list[dict]) -> list[dict]:
    """The equal-rate design (module docstring): per rate of ``check["equal_rates"]`` the paired difference compared
    − reference with both methods at that rate; ``same_as_chosen`` where those are the chosen rates (the
    pre-registered comparison: its raw-p verdict, no family), else Holm over the family of such comparisons. Each
    entry: ``lr``, ``tests`` (per method), ``diff``, ``paired``, ``p``, ``p_adj``, ``verdict``, ``same_as_chosen``,
    ``reading`` (against the study's verdict). Empty for a check without the design."""
    from layerscale.stats.multiplicity import holm

    metric = Metric.for_language_model(not check["classification"])
    method, reference = check["method"], check["reference"]
    entries = []
    for lr in check.get("equal_rates") or []:
        tests = {m: _tests(runs, m, lr) for m in (reference, method)}
        diff = within_range(paired_interval(tests[method], tests[reference]), *metric.difference_range)
        same = check["rates"][method] == lr and check["rates"][reference] == lr
        entries.append({"lr": lr, "tests": tests, "diff": diff, "p": p_value(diff), "same_as_chosen": same,
                        "paired": sorted(set(tests[method]) & set(tests[reference]))})
    family = [e for e in entries if not e["same_as_chosen"]]
    for entry, p_adj in zip(family, holm([e["p"] for e in family])):
        entry["p_adj"] = p_adj
    for entry in entries:
        entry.setdefault("p_adj", None)
        entry["adjustment"] = f"holm ({len(family)} equal-rate)" if not entry["same_as_chosen"] else "none"
        # by the family's Holm p; the pre-registered comparison's runs by its raw p (interval excluding 0)
        entry["verdict"] = verdict_of(entry["diff"], metric.higher_is_better, entry["p_adj"])
        entry["reading"] = (reading(entry["verdict"], check["study_row"]["verdict"])
                            if entry["verdict"] not in ("", "n < 3") else "")
    return entries


def equal_rate_cells(check: dict, runs: list[dict]) -> list[dict]:
    """Each method at each equal rate (reference first, rates ascending): its runs by seed, their test values, the
    mean with its 95 % t-interval kept in the metric's range (``None`` before a run has ended), and whether it is a
    cell of the pre-registered comparison (the method at its own chosen rate)."""
    metric = Metric.for_language_model(not check["classification"])
    cells = []
    for lr in sorted(set(check.get("equal_rates") or ())):
        for m in (check["reference"], check["method"]):
            mine = sorted((r for r in runs if r["method"] == m and r["lr"] == lr), key=lambda r: r["seed"])
            values = [r["test"] for r in mine if r["test"] is not None]
            cells.append({"method": m, "lr": lr, "runs": mine, "values": values,
                          "cell": within_range(mean_interval(values), *metric.value_range) if values else None,
                          "pre_registered": lr == check["rates"][m]})
    return cells


def result_rows(check: dict, runs: list[dict]) -> list[dict]:
    metric, tests, cells, diff, p, verdict, paired = heldout_comparison(check, runs)
    common = {"depth": check["depth"]}
    rows = []
    for method in (check["reference"], check["method"]):
        cell = cells[method]
        rows.append({**common, "kind": "cell", "source": "heldout", "data": check["heldout_data"], "method": method,
                     "lr": check["rates"][method], "n": len(tests[method]), "mean": cell.mean if cell else None,
                     "low": cell.low if cell else None, "high": cell.high if cell else None,
                     "truncated": cell.truncated if cell else "",
                     "values": ";".join(f"{s}:{v!r}" for s, v in sorted(tests[method].items()))})
    comparison = {**common, "kind": "difference", "method": check["method"], "reference": check["reference"],
                  "lr": check["rates"][check["method"]], "reference_lr": check["rates"][check["reference"]]}
    rows.append({**comparison, "source": "heldout", "data": check["heldout_data"], "n": len(paired),
                 "mean": diff.mean if diff else None, "low": diff.low if diff else None,
                 "high": diff.high if diff else None, "truncated": diff.truncated if diff else "", "p_raw": p,
                 "adjustment": "none", "verdict": verdict,
                 "values": ";".join(f"{s}:{v!r}" for s, v in zip(paired, diff.values)) if diff else ""})
    s = check["study_row"]
    rows.append({**comparison, "source": "study", "data": check["study_data"], "n": int(s["diff_n"] or 0),
                 "mean": _number(s["diff_mean"]), "low": _number(s["diff_ci_low"]), "high": _number(s["diff_ci_high"]),
                 "truncated": s["diff_truncated"], "p_raw": _number(s["p_raw"]), "p_adj": _number(s["p_adj"]),
                 "adjustment": s["adjustment"], "verdict": s["verdict"], "values": s["diff_per_seed"],
                 "bootstrap_low": _number(s["bootstrap_low"]), "bootstrap_high": _number(s["bootstrap_high"])})
    for c in equal_rate_cells(check, runs):
        if c["pre_registered"]:
            continue  # the "heldout" cell row above
        cell = c["cell"]
        rows.append({**common, "kind": "cell", "source": "heldout-equal-rate", "data": check["heldout_data"],
                     "method": c["method"], "lr": c["lr"], "n": len(c["values"]),
                     "mean": cell.mean if cell else None, "low": cell.low if cell else None,
                     "high": cell.high if cell else None, "truncated": cell.truncated if cell else "",
                     "values": ";".join(f"{r['seed']}:{r['test']!r}" for r in c["runs"] if r["test"] is not None)})
    for e in equal_rate_comparisons(check, runs):
        diff = e["diff"]
        rows.append({**comparison, "lr": e["lr"], "reference_lr": e["lr"], "source": "heldout-equal-rate",
                     "data": check["heldout_data"], "n": len(e["paired"]), "mean": diff.mean if diff else None,
                     "low": diff.low if diff else None, "high": diff.high if diff else None,
                     "truncated": diff.truncated if diff else "", "p_raw": e["p"], "p_adj": e["p_adj"],
                     "adjustment": e["adjustment"] + ("; the pre-registered comparison's runs" if e["same_as_chosen"]
                                                      else ""), "verdict": e["verdict"],
                     "values": ";".join(f"{s}:{v!r}" for s, v in zip(e["paired"], diff.values)) if diff else ""})
    return rows


def _value(value, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def reading(heldout: str, study: str) -> str:
    """How the held-out verdict reads against the study's, in three words (issue 60, 2026-12-06): **replicated** —
    the same difference, beyond noise, on data the study did not use; **contradicted** — a difference beyond noise
    of the opposite sign; **inconclusive** — anything else: within noise where the study found a difference (not
    replicated at this power, which is no contradiction), a difference where the study found none, or within noise
    both times (a null result is not replicated by another null: the design's addendum of 2026-12-01 17:10 UTC read
    that case as "held", which overstated it)."""
    directional = ("better", "worse")
    if heldout == "no spread":
        return "inconclusive: no spread on the held-out data, so no verdict to compare"
    if heldout in directional and heldout == study:
        return "replicated: the same verdict on data the study did not use"
    if heldout in directional and study in directional:
        return "contradicted: a significant difference of the opposite sign"
    if heldout == "within noise" and study in directional:
        return "inconclusive: not replicated at this power (3 seeds); not a contradiction"
    if heldout == "within noise" and study == "within noise":
        return "inconclusive: within noise both times (a null result is not replicated by another null)"
    if heldout in directional:
        return (f"inconclusive: a difference on the held-out data ({heldout}) where the study's verdict is "
                f"{study or 'missing'}")
    return f"inconclusive: held-out {heldout or 'missing'}, study {study or 'missing'}"


def report_text(check: dict, runs: list[dict]) -> str:
    """results.md: a title, then :func:`sections` at ``##``."""
    return "\n".join([f"# Held-out check: {check['method']} vs {check['reference']} at depth {check['depth']} "
                      f"({check['study']})", "",
                      "<!-- generated by scripts/heldout_check.py from check.json and runs.csv; do not edit -->", "",
                      *sections(check, runs, "##")])


def sections(check: dict, runs: list[dict], level: str) -> list[str]:
    """The report's design paragraph and sections (headings at ``level``) as Markdown lines."""
    metric, tests, cells, diff, p, verdict, paired = heldout_comparison(check, runs)
    d, unit = metric.digits, metric.difference_unit
    method, reference, depth = check["method"], check["reference"], check["depth"]
    s = check["study_row"]
    study_diff = row_interval(s, "diff")
    every_run, runs = runs, _chosen(check, runs)
    ended = sum(r["status"] != "pending" for r in runs)
    total = len(check["seeds"]) * 2
    budget, corpus = check["budget"], check.get("corpus")
    lines = [f"Design: {check['addendum'] or 'the study DESIGN.md'} (\"Held-out check\"), written before any held-out "
             f"run. The study's primary comparison {method} − {reference} at depth {depth} "
             f"({check['study_folder']}, data {check['study_data']}) trained again on {check['heldout_data']}, which "
             f"the study did not use: seeds {', '.join(str(x) for x in check['seeds'])}, each method at the rate the "
             f"study chose for its cell. {ended} of {max(total, len(runs))} held-out runs ended "
             f"({sum(r['status'] == 'diverged' for r in runs)} diverged).", "",
             f"{level} The comparison", "",
             f"{method} − {reference}, {metric.name} ({unit}; "
             f"{'higher' if metric.higher_is_better else 'lower'} is better), paired by seed, mean with its 95 % "
             "t-interval. The study's row is its primary family's (Holm-adjusted p, the verdict by it); the held-out "
             "comparison is a single pre-registered comparison, so its verdict uses the raw p-value with no "
             "multiplicity adjustment.", "",
             "| | data | seeds | difference | p (raw) | p (adjusted) | verdict |", "|---|---|---|---|---|---|---|",
             f"| study ({s['family'] or 'no family'}) | {check['study_data']} | {s['diff_n'] or 0} | "
             f"{format_interval(study_diff, d, signed=True)} | {format_p(_number(s['p_raw']))} | "
             f"{format_p(_number(s['p_adj']))} ({s['adjustment'] or '—'}) | {s['verdict'] or '—'} |",
             f"| held-out | {check['heldout_data']} | {len(paired)} | {format_interval(diff, d, signed=True)} | "
             f"{format_p(p)} | none (one comparison) | {verdict or '—'} |", ""]
    if s.get("bootstrap_low"):
        lines += [f"The study's two-level bootstrap interval: [{float(s['bootstrap_low']):.{d}f}, "
                  f"{float(s['bootstrap_high']):.{d}f}].", ""]
    if verdict in ("", "n < 3"):
        lines += [f"The held-out check is not complete: {len(paired)} of {len(check['seeds'])} seeds paired.", ""]
    else:
        lines += [f"Held-out verdict: {verdict}; the study's: {s['verdict'] or '—'}. Reading (replicated, "
                  "contradicted or inconclusive, the rule of 2026-12-06; the design's addendum of 2026-12-01 17:10 UTC "
                  f"read two null results as \"held\"): {reading(verdict, s['verdict'])}.", ""]
    lines += equal_rate_lines(check, every_run, level)
    lines += [f"{level} Per method (held-out)", "",
              f"The test metric on {check['heldout_data']}: mean over seeds with its 95 % t-interval "
              f"({'truncated to [0, 100]' if metric.classification else 'bits per byte'}), each seed's value, and "
              "each run's training seconds and steps.", "",
              "| method | rate (the study's choice) | parameters (study / held-out) | test | per seed | "
              "training seconds per seed | steps |", "|---|---|---|---|---|---|---|"]
    study_params = {method: s.get("params", ""), reference: check["reference_row"].get("params", "")}
    for m in (reference, method):
        mine = sorted((r for r in runs if r["method"] == m), key=lambda r: r["seed"])
        per_seed = ", ".join(f"{r['seed']}: " + (_value(r["test"], d) if r["test"] is not None else r["status"])
                             for r in mine)
        seconds = ", ".join("—" if r["train_s"] is None else f"{r['train_s']:.0f}" for r in mine)
        steps = ", ".join("—" if r["steps"] is None else str(r["steps"]) for r in mine)
        lines.append(f"| {m} | {check['rates'][m]:g} | {study_params[m] or '—'} / {check['params'][m]} | "
                     f"{format_interval(cells[m], d)} | {per_seed or '—'} | {seconds or '—'} | {steps or '—'} |")
    lines += ["", f"{level} What the held-out runs change", "",
              "Each held-out run's config is the study's recorded config of the same method, depth, chosen rate and "
              "seed with only these keys changed (and `run.out_dir`, the held-out run folder):", "",
              "| key | study | held-out |", "|---|---|---|"]
    lines += [f"| `{c['key']}` | {json.dumps(c['study'])} | {json.dumps(c['heldout'])} |" for c in check["changes"]]
    rule = ("the study's planned optimizer steps kept (`optim.max_steps`; `optim.epochs` raised where the held-out "
            "training split is smaller, so the epochs never cap the steps)" if budget["rule"] == "steps"
            else "the study's `optim` keys unchanged (its epochs over the held-out training split)")
    lines += ["", f"Budget: {rule}: the study's runs plan {budget['study_steps']} steps; the held-out runs plan "
              f"{budget['heldout_steps']} ({budget['steps_per_epoch']} steps per epoch of the held-out training "
              f"split). Held-out data: {check['data_description']}."
              + (f" The corpus: {corpus['files']} files, {corpus['bytes']:,} bytes joined, SHA-256 "
                 f"`{corpus['sha256']}`." if corpus else ""), "", TRUNCATION_NOTE, ""]
    return lines


def equal_rate_lines(check: dict, runs: list[dict], level: str) -> list[str]:
    """The "Both methods at the same rate" section (issue 60), or nothing for a check without the design."""
    entries = equal_rate_comparisons(check, runs)
    if not entries:
        return []
    metric = Metric.for_language_model(not check["classification"])
    d = metric.digits
    method, reference = check["method"], check["reference"]
    ended = sum(r["status"] != "pending" for r in runs
                if r["lr"] in check["equal_rates"] and r["method"] in (method, reference))
    total = len(check["seeds"]) * 2 * len(set(check["equal_rates"]))
    family = sum(not e["same_as_chosen"] for e in entries)
    seeds = ", ".join(str(x) for x in check["seeds"])
    if check["rates"][reference] == check["rates"][method]:
        intro = (f"Both methods chose {check['rates'][method]:g}, so the comparison above already runs them at the "
                 "same rate: the equal-rate design (the design's addendum of 2026-12-06, written before these runs) "
                 f"adds no run, and its one row is that comparison, counted once (seeds {seeds}; {ended} of "
                 f"{total} runs ended). It reads against the study's verdict by the same rule.")
    else:
        intro = (f"The comparison above runs each method at its own chosen rate ({reference} "
                 f"{check['rates'][reference]:g}, {method} {check['rates'][method]:g}), so part of a difference may "
                 "be the rate's. Here both methods run at the reference's chosen rate and both at the compared "
                 f"method's (the design's addendum of 2026-12-06, written before these runs), seeds {seeds}, paired "
                 f"by seed; {ended} of {total} runs ended. The {family} comparison{'s' if family != 1 else ''} "
                 f"{'form a family of their' if family != 1 else 'forms a family of its'} own, Holm-adjusted. "
                 "Each reads against the study's verdict by the same rule.")
    lines = [f"{level} Both methods at the same rate", "", intro, "",
             "| both at | seeds | difference | p (raw) | p (adjusted) | verdict | reading |",
             "|---|---|---|---|---|---|---|"]
    for e in entries:
        adjusted = ("the comparison above (counted once)" if e["same_as_chosen"]
                    else f"{format_p(e['p_adj'])}, {e['adjustment']}")
        lines.append(f"| {e['lr']:g} | {len(e['paired'])} | {format_interval(e['diff'], d, signed=True)} | "
                     f"{format_p(e['p'])} | {adjusted} | {e['verdict'] or '—'} | "
                     f"{e['reading'] or 'not complete'} |")
    lines += ["", "Per method at each rate (test metric, each seed):", "",
              "| method | rate | test | per seed |", "|---|---|---|---|"]
    for c in equal_rate_cells(check, runs):
        per_seed = ", ".join(f"{r['seed']}: " + (_value(r["test"], d) if r["test"] is not None else r["status"])
                             for r in c["runs"])
        lines.append(f"| {c['method']} | {c['lr']:g} | {format_interval(c['cell'], d)} | {per_seed or '—'} |")
    return lines + [""]


def _load(out: Path) -> tuple[dict, list[dict]] | None:
    """``check.json`` and the typed ``runs.csv`` of the check in ``out``; ``None`` before the check has run."""
    path = out / CHECK_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")), read_runs(out / "runs.csv")


def heldout_sections(out: str | Path, level: str = "###") -> list[str]:
    """docs/RESULTS.md's block of the check in ``out`` (headings at ``level``): its sections, or one line saying
    that it has not run yet."""
    loaded = _load(Path(out))
    if loaded is None:
        return ["Not run yet: the held-out check runs once the redo has chosen the rates of its cell "
                "(`python scripts/heldout_check.py --study NAME`, NAME the redo's folder).", ""]
    return sections(*loaded, level)


def write_report(out: str | Path) -> None:
    """results.csv and results.md from check.json and runs.csv in ``out`` (each written atomically);
    ``FileNotFoundError`` before the check has run."""
    out = Path(out)
    loaded = _load(out)
    if loaded is None:
        raise FileNotFoundError(f"{out / CHECK_FILE} not found: the held-out check has not run yet "
                                "(scripts/heldout_check.py)")
    check, runs = loaded
    write_text_atomic(out / "results.csv", csv_text(result_rows(check, runs), RESULT_FIELDS))
    write_text_atomic(out / "results.md", report_text(check, runs))


