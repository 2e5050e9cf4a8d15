"""The real-vocabulary pruning example's tables and report (docs/results/llama-prune/DESIGN.md).

:func:`collect` reads the run records and the prune outputs under ``runs/llama-prune`` and writes three CSVs at
full precision: ``runs.csv`` (one row per training run), ``pruning.csv`` (per final model, criterion and ``n``: the
blocks removed and the evaluation loss and its change with their 95 % bootstrap intervals over windows, from each
prune call's ``criteria.json``; ``n = 0`` the unpruned model) and ``healing.csv`` (per healed prune call: pruned,
healed and healed-control loss with intervals, from its ``config.json``). :func:`write_report` renders
``results.md`` from the CSVs alone, with :func:`llama_prune_sections`, which docs/RESULTS.md prints too
(``evidence.results_page``), so neither can drift from the tables.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from layerscale.atomic_io import write_text_atomic
from layerscale.stats.intervals import Interval, mean_interval, p_value, welch_interval
from layerscale.stats.multiplicity import benjamini_hochberg
from layerscale.stats.stability import loss_spikes
from layerscale.study.report.formatting import format_interval, format_p

from . import llama_prune_plan as plan

RUN_FIELDS = ["variant", "lr", "seed", "steps", "status", "validation_loss", "loss_spikes", "wall_time_s"]
PRUNING_FIELDS = ["variant", "lr", "seed", "criterion", "n", "blocks", "loss", "loss_low", "loss_high",
                  "delta_loss", "delta_low", "delta_high"]
HEALING_FIELDS = ["variant", "lr", "seed", "criterion", "n", "mode", "same_blocks_as", "blocks", "heal_steps",
                  "pruned_loss", "pruned_low", "pruned_high", "healed_loss", "healed_low", "healed_high",
                  "control_loss", "control_low", "control_high"]
#: records of this many steps (their mean loss) are what the spike rule reads (docs/results/confirm/DESIGN.md)
SPIKE_RECORD_STEPS = 10
DIGITS = 3


def spike_count(train_loss: list[float]) -> int:
    """Loss spikes under Lightning's ``SpikeDetection`` defaults over records of 10 steps' mean loss."""
    records = [sum(train_loss[i:i + SPIKE_RECORD_STEPS]) / len(train_loss[i:i + SPIKE_RECORD_STEPS])
               for i in range(0, len(train_loss), SPIKE_RECORD_STEPS)]
    return len(loss_spikes(records))


def _blocks(indices: list[int]) -> str:
    """0-based block indices as the 1-based, space-separated list the tables print."""
    return " ".join(str(i + 1) for i in indices)


def _final_models(work: Path, runs: list[dict], variants: tuple[str, ...]) -> list[tuple[str, float, int]]:
    models = []
    for variant in variants:
        rate = chosen_rate(runs, variant)
        if rate is not None:
            models += [(variant, rate, seed) for seed in plan.SEEDS
                       if (work / "prune" / plan.run_name(variant, rate, seed)).is_dir()]
    return models


def _run_rows(work: Path) -> list[dict]:
    rows = []
    for path in sorted((work / "train").glob("*/run.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        rows.append({"variant": record["variant"], "lr": repr(record["lr"]), "seed": record["seed"],
                     "steps": record["steps"], "status": record["status"],
                     "validation_loss": repr(record["validation_loss"]),
                     "loss_spikes": spike_count(record["train_loss"]), "wall_time_s": repr(record["wall_time_s"])})
    return sorted(rows, key=lambda r: (plan.VARIANTS.index(r["variant"]), float(r["lr"]), r["seed"]))


def _pruning_rows(folder: Path, variant: str, lr: float, seed: int) -> list[dict]:
    path = folder / "curves" / "pruning_report" / "criteria.json"
    if not path.is_file():
        return []
    raw = json.loads(path.read_text(encoding="utf-8"))
    base = {"variant": variant, "lr": repr(lr), "seed": seed}
    low, high = raw["clean_loss_interval"]
    rows = [{**base, "criterion": "none", "n": 0, "blocks": "", "loss": repr(raw["clean_loss"]), "loss_low": repr(low),
             "loss_high": repr(high), "delta_loss": "0.0", "delta_low": "0.0", "delta_high": "0.0"}]
    for criterion, curve in raw["curves"].items():
        for index, blocks in enumerate(curve["sets"]):
            (l_low, l_high), (d_low, d_high) = curve["loss_interval"][index], curve["delta_loss_interval"][index]
            rows.append({**base, "criterion": criterion, "n": index + 1, "blocks": _blocks(blocks),
                         "loss": repr(curve["loss"][index]), "loss_low": repr(l_low), "loss_high": repr(l_high),
                         "delta_loss": repr(curve["delta_loss"][index]), "delta_low": repr(d_low),
                         "delta_high": repr(d_high)})
    return rows


def _loss_fields(prefix: str, record: dict) -> dict:
    low, high = record["loss_interval"]
    return {f"{prefix}_loss": repr(record["loss"]), f"{prefix}_low": repr(low), f"{prefix}_high": repr(high)}


def _healing_rows(folder: Path, variant: str, lr: float, seed: int, pruning: list[dict]) -> list[dict]:
    chosen = {(r["criterion"], r["n"]): r["blocks"] for r in pruning}
    rows = []
    for n in plan.HEALED_N:
        first_with: dict[str, str] = {}
        for criterion in plan.criteria(variant):
            blocks = chosen.get((criterion, n))
            if blocks is None:
                continue
            source = first_with.setdefault(blocks, criterion)
            for mode in plan.HEAL_MODES:
                path = folder / f"heal-{mode}-n{n}-{source}" / "config.json"
                if not path.is_file():
                    continue
                surgery = json.loads(path.read_text(encoding="utf-8"))["layerscale_surgery"]
                if _blocks(surgery["removed_blocks"]) != blocks:
                    raise ValueError(f"{path}: removed blocks {surgery['removed_blocks']} are not the curve's "
                                     f"{blocks} (1-based) for {criterion} at n = {n}")
                rows.append({"variant": variant, "lr": repr(lr), "seed": seed, "criterion": criterion, "n": n,
                             "mode": mode, "same_blocks_as": "" if source == criterion else source,
                             "blocks": blocks, "heal_steps": surgery["heal_steps"],
                             **_loss_fields("pruned", surgery["perplexity"]["pruned"]),
                             **_loss_fields("healed", surgery["perplexity_after_heal"]),
                             **_loss_fields("control", surgery["control_perplexity_after_heal"])})
    return rows


def _csv_text(fields: list[str], rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _by_variant(rows: list[dict]) -> list[dict]:
    """Rows in the design's variant order, each variant's rows in the order they came (a stable sort)."""
    return sorted(rows, key=lambda r: plan.VARIANTS.index(r["variant"]))


def collect(work: str | Path, out: str | Path, recorded_variants: tuple[str, ...] = ()) -> None:
    """``runs.csv``, ``pruning.csv``, ``healing.csv`` in ``out`` from the records under ``work``, then the report.

    The rows of ``recorded_variants`` are kept as ``out``'s tables hold them (their records are not under ``work``:
    DESIGN.md, addendum of 2026-12-06 12:35 UTC); every other variant's rows come from ``work`` alone."""
    work, out = Path(work), Path(out)
    unknown = sorted(set(recorded_variants) - set(plan.VARIANTS))
    if unknown:
        raise ValueError(f"recorded variants must be among {plan.VARIANTS}, got {unknown}")
    kept = load_tables(out) if recorded_variants else Tables([], [], [])
    if recorded_variants and not any(r["variant"] in recorded_variants for r in kept.runs):
        raise ValueError(f"{out / 'runs.csv'} holds no rows of {list(recorded_variants)} to keep")

    def recorded(rows: list[dict]) -> list[dict]:
        return [r for r in rows if r["variant"] in recorded_variants]

    fresh = [r for r in _run_rows(work) if r["variant"] not in recorded_variants]
    runs = sorted(recorded(kept.runs) + fresh,
                  key=lambda r: (plan.VARIANTS.index(r["variant"]), float(r["lr"]), int(r["seed"])))
    pruning, healing = recorded(kept.pruning), recorded(kept.healing)
    redone = tuple(v for v in plan.VARIANTS if v not in recorded_variants)
    for variant, lr, seed in _final_models(work, runs, redone):
        folder = work / "prune" / plan.run_name(variant, lr, seed)
        rows = _pruning_rows(folder, variant, lr, seed)
        pruning += rows
        healing += _healing_rows(folder, variant, lr, seed, rows)
    write_text_atomic(out / "runs.csv", _csv_text(RUN_FIELDS, runs))
    write_text_atomic(out / "pruning.csv", _csv_text(PRUNING_FIELDS, _by_variant(pruning)))
    write_text_atomic(out / "healing.csv", _csv_text(HEALING_FIELDS, _by_variant(healing)))
    write_report(out)


# ---------------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Tables:
    runs: list[dict]
    pruning: list[dict]
    healing: list[dict]


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def load_tables(out: str | Path) -> Tables:
    out = Path(out)
    return Tables(_read(out / "runs.csv"), _read(out / "pruning.csv"), _read(out / "healing.csv"))


def chosen_rate(runs: list[dict], variant: str) -> float | None:
    """The chosen rate of ``variant`` from its seed-0 grid rows (``None`` while the grid, or an extension the edge
    rule asks for, has not run)."""
    losses = {float(r["lr"]): float(r["validation_loss"]) for r in runs
              if r["variant"] == variant and int(r["seed"]) == 0}
    if not set(plan.GRID) <= set(losses):
        return None
    choice = plan.choose(losses)
    return None if plan.extension(sorted(losses), choice) is not None else choice


def _models(tables: Tables, variant: str) -> list[int]:
    return sorted({int(r["seed"]) for r in tables.pruning if r["variant"] == variant})


def _curve(tables: Tables, variant: str, criterion: str, seed: int) -> dict[int, dict]:
    return {int(r["n"]): r for r in tables.pruning
            if r["variant"] == variant and r["criterion"] == criterion and int(r["seed"]) == seed}


def blocks_within(tables: Tables, variant: str, criterion: str, seed: int, delta: float = plan.DELTA) -> int:
    """``n_δ``: the most blocks whose removal raises the mean evaluation loss by at most ``delta`` nats."""
    curve = _curve(tables, variant, criterion, seed)
    return max([0] + [n for n, r in curve.items() if float(r["delta_loss"]) <= delta])


def _interval_text(interval: Interval | None, digits: int = DIGITS, signed: bool = True) -> str:
    return "–" if interval is None else format_interval(interval, digits, signed)


# ---------------------------------------------------------------------------------------------------- sections


def _status(tables: Tables) -> list[str]:
    finals = sum(len(_models(tables, v)) for v in plan.VARIANTS)
    expected = len(plan.VARIANTS) * len(plan.SEEDS)
    healed = len({(r["variant"], r["seed"], r["criterion"], r["n"], r["mode"]) for r in tables.healing})
    hours = sum(float(r["wall_time_s"]) for r in tables.runs) / 3600
    rows = len(plan.SEEDS) * len(plan.HEALED_N) * len(plan.HEAL_MODES) * sum(len(plan.criteria(v))
                                                                             for v in plan.VARIANTS)
    withdrawn = len({(r["variant"], r["seed"], r["criterion"], r["n"], r["mode"]) for r in tables.healing
                     if (r["variant"], r["mode"]) in plan.WITHDRAWN})
    done = finals == expected and healed == rows and not withdrawn
    state = "complete" if done else "in progress: the tables below hold what has run"
    return [f"Status: {state}. {len(tables.runs)} training runs ({hours:.2f} h of training, summed), {finals} of "
            f"{expected} final models pruned, {healed} of {rows} healed rows"
            + (f" ({withdrawn} of them withdrawn: see question 1)" if withdrawn else "") + ". Design: "
            "[docs/results/llama-prune/DESIGN.md](https://github.com/torch-layerscale/torch-layerscale/blob/main/"
            "docs/results/llama-prune/DESIGN.md).", ""]


def _rates(tables: Tables, level: str) -> list[str]:
    rates = sorted({float(r["lr"]) for r in tables.runs if int(r["seed"]) == 0})
    if not rates:
        return [f"{level} Learning rates", "", "No training run has finished yet.", ""]
    lines = [f"{level} Learning rates", "",
             "Final validation loss (nats per token) of seed 0 at each rate; the chosen rate in bold (lowest loss; "
             "the grid extended past an edge holding the best).", "",
             "| variant | " + " | ".join(f"{lr:g}" for lr in rates) + " |",
             "|---|" + "---|" * len(rates)]
    for variant in plan.VARIANTS:
        chosen = chosen_rate(tables.runs, variant)
        cells = []
        for lr in rates:
            row = next((r for r in tables.runs if r["variant"] == variant and float(r["lr"]) == lr
                        and int(r["seed"]) == 0), None)
            text = "–" if row is None else ("diverged" if row["status"] != "finished"
                                             else f"{float(row['validation_loss']):.4f}")
            cells.append(f"**{text}**" if chosen == lr else text)
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines + [""]


def _final(tables: Tables, level: str) -> list[str]:
    lines = [f"{level} The trained models", "",
             "Per variant at its chosen rate: validation loss (training recipe's split) and the unpruned model's "
             "evaluation loss on the held-out windows `prune` judges on, per seed and as a mean with its 95 % "
             "t-interval over seeds; perplexity is exp of the loss.", "",
             "| variant | rate | seeds | validation loss | evaluation loss | evaluation perplexity | loss spikes "
             "| diverged runs (all rates) |", "|---|---|---|---|---|---|---|---|"]
    for variant in plan.VARIANTS:
        rate = chosen_rate(tables.runs, variant)
        if rate is None:
            continue
        finals = [r for r in tables.runs if r["variant"] == variant and float(r["lr"]) == rate]
        seeds = [int(r["seed"]) for r in finals]
        validation = mean_interval([float(r["validation_loss"]) for r in finals])
        clean = mean_interval([float(r["loss"]) for r in tables.pruning
                               if r["variant"] == variant and r["criterion"] == "none"])
        ppl = "–" if clean is None else (f"{math.exp(clean.mean):.2f}" + (
            "" if clean.low is None else f" [{math.exp(clean.low):.2f}, {math.exp(clean.high):.2f}]"))
        spikes = ", ".join(r["loss_spikes"] for r in finals)
        diverged = sum(r["status"] != "finished" for r in tables.runs if r["variant"] == variant)
        lines.append(f"| {variant} | {rate:g} | {', '.join(map(str, seeds))} | {_interval_text(validation, signed=False)} | "
                     f"{_interval_text(clean, signed=False)} | {ppl} | {spikes} | {diverged} |")
    return lines + [""]


def _criteria(tables: Tables, variant: str) -> list[str]:
    return [c for c in plan.criteria(variant) if any(r["criterion"] == c and r["variant"] == variant
                                                     for r in tables.pruning)]


def _curves(tables: Tables, level: str) -> list[str]:
    ns = range(1, plan.MAX_REMOVED + 1)
    lines = [f"{level} Removal curves (unhealed)", "",
             f"Mean change in evaluation loss (nats) after removing n of the {plan.DEPTH} blocks by each criterion, over the "
             "seeds, with its 95 % t-interval over seeds (each seed's own bootstrap interval over windows is in "
             "`pruning.csv`).", "",
             "| variant | criterion | " + " | ".join(f"n = {n}" for n in ns) + " |", "|---|---|" + "---|" * len(ns)]
    for variant in plan.VARIANTS:
        for criterion in _criteria(tables, variant):
            cells = []
            for n in ns:
                values = [float(r["delta_loss"]) for r in tables.pruning if r["variant"] == variant
                          and r["criterion"] == criterion and int(r["n"]) == n]
                cells.append(_interval_text(mean_interval(values)))
            lines.append(f"| {variant} | {criterion} | " + " | ".join(cells) + " |")
    return lines + [""]


def _question_one(tables: Tables, level: str) -> list[str]:
    lines = [f"{level} How many blocks go before perplexity breaks", "",
             f"`n_{plan.DELTA:g}`: the most blocks whose removal raises the evaluation loss by at most {plan.DELTA:g} "
             f"nats (perplexity by at most {100 * math.expm1(plan.DELTA):.1f} %), per seed, unhealed. Healed: the healed "
             "pruned model's loss minus the unpruned control healed alike, mean over seeds with its 95 % t-interval "
             f"(at most {plan.DELTA:g}: the healed model kept its loss).", "",
             "| variant | criterion | n_δ per seed (unhealed) | "
             + " | ".join(f"healed {mode}, n = {n}" for n in plan.HEALED_N for mode in plan.HEAL_MODES) + " |",
             "|---|---|---|" + "---|" * (len(plan.HEALED_N) * len(plan.HEAL_MODES))]
    for variant in plan.VARIANTS:
        for criterion in _criteria(tables, variant):
            counts = [str(blocks_within(tables, variant, criterion, seed)) for seed in _models(tables, variant)]
            cells = []
            for n in plan.HEALED_N:
                for mode in plan.HEAL_MODES:
                    if (variant, mode) in plan.WITHDRAWN:
                        cells.append("withdrawn")
                        continue
                    values = [float(r["healed_loss"]) - float(r["control_loss"]) for r in tables.healing
                              if r["variant"] == variant and r["criterion"] == criterion and int(r["n"]) == n
                              and r["mode"] == mode]
                    cells.append(_interval_text(mean_interval(values)))
            lines.append(f"| {variant} | {criterion} | {', '.join(counts)} | " + " | ".join(cells) + " |")
    notes = [f"Withdrawn, {variant} healed with {mode}: {why}." for (variant, mode), why in plan.WITHDRAWN.items()
             if any(r["variant"] == variant and r["mode"] == mode for r in tables.healing)]
    return lines + ([""] + notes if notes else []) + [""]


def deep_share(tables: Tables, variant: str, criterion: str, n: int) -> tuple[int, int, int, float | None]:
    """Over the seeds at ``n``: blocks removed in the deeper half (9–16), blocks removed, seeds removing the final
    block, and the mean 1-based index of the removed blocks."""
    rows = [r for r in tables.pruning if r["variant"] == variant and r["criterion"] == criterion and int(r["n"]) == n]
    indices = [int(b) for r in rows for b in r["blocks"].split()]
    deep = sum(i > plan.DEPTH // 2 for i in indices)
    last = sum(str(plan.DEPTH) in r["blocks"].split() for r in rows)
    return deep, len(indices), last, (sum(indices) / len(indices) if indices else None)


def _question_two(tables: Tables, level: str) -> list[str]:
    lines = [f"{level} Do deep blocks go first", "",
             "Blocks each criterion removes at n = 4 and n = 8, pooled over the seeds: how many lie in the deeper "
             "half (blocks 9–16), their mean index (1-based; the middle of the stack is 8.5), and in how many seeds "
             "the final block 16 is among them. 'Deep first' reads yes when more than half of the removed blocks lie "
             "in the deeper half.", "",
             "| variant | criterion | " + " | ".join(f"n = {n}: deeper half | mean index | block 16"
                                                      for n in plan.HEALED_N) + " | deep first (n = 4) |",
             "|---|---|" + "---|---|---|" * len(plan.HEALED_N) + "---|"]
    for variant in plan.VARIANTS:
        for criterion in _criteria(tables, variant):
            cells, first = [], "–"
            for n in plan.HEALED_N:
                deep, total, last, mean = deep_share(tables, variant, criterion, n)
                seeds = len(_models(tables, variant))
                cells += [f"{deep} of {total}", "–" if mean is None else f"{mean:.1f}", f"{last} of {seeds}"]
                if n == plan.HEALED_N[0] and total:
                    first = "yes" if 2 * deep > total else "no"
            lines.append(f"| {variant} | {criterion} | " + " | ".join(cells) + f" | {first} |")
    return lines + [""]


def layerscale_rows(tables: Tables) -> list[dict]:
    """LayerScale minus Pre-LN in unhealed Δ loss per shared criterion and healed ``n`` (Welch), BH over them."""
    rows = []
    for criterion in plan.CRITERIA:
        for n in plan.HEALED_N:
            arms = [mean_interval([float(r["delta_loss"]) for r in tables.pruning if r["variant"] == variant
                                   and r["criterion"] == criterion and int(r["n"]) == n])
                    for variant in ("layerscale", "prenorm")]
            if arms[0] is None or arms[1] is None:
                continue
            difference = welch_interval(arms[0], arms[1])
            rows.append({"criterion": criterion, "n": n, "difference": difference, "p": p_value(difference)})
    for row, adjusted in zip(rows, benjamini_hochberg([r["p"] for r in rows])):
        row["p_bh"] = adjusted
        interval = row["difference"]
        excluded = interval is not None and interval.excludes(0.0)
        row["verdict"] = ("within noise" if not excluded or adjusted is None or adjusted >= 0.05
                          else "LayerScale lower" if interval.mean < 0 else "LayerScale higher")
    return rows


def _question_three(tables: Tables, level: str) -> list[str]:
    rows = layerscale_rows(tables)
    lines = [f"{level} Does LayerScale change the answer", "",
             "LayerScale minus Pre-LN in the unhealed loss change (nats) at n = 4 and 8 per criterion: Welch's 95 % "
             "interval over the two variants' seeds, its p-value and the Benjamini–Hochberg adjustment over these "
             "rows (exploratory). Lower: LayerScale's blocks go with less loss.", "",
             "| criterion | n | LayerScale − Pre-LN | p | BH p | reads |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['criterion']} | {row['n']} | {_interval_text(row['difference'])} | "
                     f"{format_p(row['p'])} | {format_p(row['p_bh'])} | {row['verdict']} |")
    return lines + ([""] if rows else ["", "Not yet: both variants' models are needed.", ""])


def healing_recovery(tables: Tables, variant: str, criterion: str, n: int,
                     mode: str) -> tuple[list[float], list[float]]:
    """Per seed with a healed row: the unhealed loss change ``Δ = L(pruned) − L(unpruned)`` and what healing took
    back, ``Δ − (L(healed pruned) − L(control healed alike))`` (nats; positive: healing closed part of the gap)."""
    unhealed, recovered = [], []
    for r in tables.healing:
        if r["variant"] != variant or r["criterion"] != criterion or int(r["n"]) != n or r["mode"] != mode:
            continue
        curve = _curve(tables, variant, criterion, int(r["seed"]))
        if n not in curve:
            continue
        delta = float(curve[n]["delta_loss"])
        unhealed.append(delta)
        recovered.append(delta - (float(r["healed_loss"]) - float(r["control_loss"])))
    return unhealed, recovered


def _papers(tables: Tables, level: str) -> list[str]:
    """One sentence per variant and paper, every number from the tables above."""
    lines = [f"{level} Against the papers", ""]
    quarter = plan.HEALED_N[0]
    for variant in plan.VARIANTS:
        seeds = _models(tables, variant)
        if not seeds:
            continue
        shift = mean_interval([float(r["delta_loss"]) for r in tables.pruning if r["variant"] == variant
                               and r["criterion"] == "block_influence" and int(r["n"]) == quarter])
        kept = [blocks_within(tables, variant, "block_influence", s) for s in seeds]
        counts = ", ".join(str(k) for k in kept)
        at_quarter = [_curve(tables, variant, "block_influence", s).get(plan.DEPTH // 4) for s in seeds]
        quarter_kept = ("in line with its quarter: every seed" if all(
            r is not None and float(r["delta_loss"]) <= plan.DELTA for r in at_quarter)
            else "short of its quarter: not every seed")
        deep, total, last, _ = deep_share(tables, variant, "block_influence", quarter)
        lines.append(f"- **{variant}, ShortGPT** (Block Influence; removing about a quarter of the layers keeps most "
                     f"of the model, the deeper layers most redundant): removing {quarter} of {plan.DEPTH} blocks "
                     f"changes the evaluation loss by {_interval_text(shift)} nats; the loss holds within "
                     f"{plan.DELTA:g} nats up to n_δ = {counts} blocks (per seed; {quarter_kept} keeps its loss "
                     f"within {plan.DELTA:g} nats with {plan.DEPTH // 4} of {plan.DEPTH} blocks removed); "
                     f"{deep} of {total} removed blocks lie "
                     f"in the deeper half — " + ("in line with" if total and 2 * deep > total else "unlike")
                     + " its finding that deep layers go first.")
        deep, total, last, _ = deep_share(tables, variant, "gromov", quarter)
        healed = [float(r["healed_loss"]) - float(r["control_loss"]) for r in tables.healing
                  if r["variant"] == variant and r["criterion"] == "gromov" and int(r["n"]) == plan.HEALED_N[-1]
                  and r["mode"] == "lora"]
        unhealed, recovered = healing_recovery(tables, variant, "gromov", plan.HEALED_N[-1], "lora")
        withdrawn = plan.WITHDRAWN.get((variant, "lora"))
        lines.append(f"- **{variant}, Gromov et al.** (the span of least angular change; the deepest layers go "
                     f"first, the final layer kept; healing with LoRA recovers much of the loss): at n = {quarter} "
                     f"{deep} of {total} removed blocks lie in the deeper half — "
                     + ("in line with" if total and 2 * deep > total else "unlike")
                     + f" their finding —, block {plan.DEPTH} in {last} of {len(seeds)} seeds; "
                     + (f"its LoRA-healed rows are withdrawn: {withdrawn}." if withdrawn else
                        f"LoRA-healed at n = {plan.HEALED_N[-1]} the loss is {_interval_text(mean_interval(healed))} "
                        f"nats above the control healed alike, against {_interval_text(mean_interval(unhealed))} "
                        f"unhealed: healing took back {_interval_text(mean_interval(recovered))} nats (paired by "
                        "seed)." if recovered else
                        f"its LoRA healing at n = {plan.HEALED_N[-1]} has not run yet."))
    return lines + [""]


def llama_prune_sections(out: str | Path, level: str = "##") -> list[str]:
    """The example's status line and sections (headings at ``level``) as Markdown lines, from its CSVs."""
    tables = load_tables(out)
    lines = _status(tables)
    sections = (_rates, _final) if tables.pruning else (_rates,) if tables.runs else ()
    if tables.pruning:
        sections += (_curves, _question_one, _question_two, _question_three, _papers)
    for section in sections:
        lines += section(tables, level)
    return lines


def primary_glance(out: str | Path) -> None:
    """No line in "At a glance": the example fixed no primary family (every comparison is exploratory)."""
    return None


def write_report(out: str | Path) -> None:
    """``out/results.md`` from the CSVs in ``out``."""
    out = Path(out)
    lines = ["# Pruning a real-vocabulary Llama", ""] + llama_prune_sections(out)
    write_text_atomic(out / "results.md", "\n".join(lines).rstrip("\n") + "\n")
