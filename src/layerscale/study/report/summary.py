"""The study's Markdown: the tables a reader compares, and sentences generated from the intervals alone.

Every number printed comes with its uncertainty (:mod:`layerscale.study.report.formatting`): a 95 % t-interval over three
or more seeds, each seed's value below that. A sentence calls a method better or worse than the reference only when
the comparison's *adjusted* p-value is below 0.05 — Holm within the study's primary family, Benjamini–Hochberg
within everything else (:mod:`layerscale.study.report.verdicts`); otherwise it says "within noise". A sentence about depth
use cites the interaction table (:mod:`layerscale.study.report.depth_section`). Nothing here is hand-written about a
particular result.
"""

from __future__ import annotations

from dataclasses import dataclass

from .contrasts import Contrast
from .depth_section import depth_use_lines
from .formatting import TRUNCATION_NOTE, format_interval, format_p, wide_table
from ..design.grid import StudySpec, format_lr
from .results import CellResult, Metric, RunResult
from .stability_table import stability_lines
from .verdicts import PRIMARY, primary_key, verdict

__all__ = ["Cost", "study_cost", "format_interval", "grid_edge_sentence", "extension_pending_sentence",
           "multiplicity_sentence",
           "plain_paragraph", "primary_lines", "study_markdown", "summary_sentences"]


@dataclass(frozen=True)
class Cost:
    """Compute of the study: block-steps (steps × depth, proportional to the work) and training seconds, for the
    tuning (tuning runs; under ``tuning: grid`` the final runs at rates neither chosen nor shared), the final runs
    of the tuned table, and the final runs of the shared table (what an untuned study costs)."""

    tuning_block_steps: int
    tuned_final_block_steps: int
    shared_final_block_steps: int
    total_seconds: float
    runs: int

    @property
    def tuned_over_untuned(self) -> float | None:
        """(tuning + the tuned table's final runs) / (the shared table's final runs): what tuning costs over a
        study at one shared learning rate with the same final budget."""
        if not self.shared_final_block_steps:
            return None
        return (self.tuning_block_steps + self.tuned_final_block_steps) / self.shared_final_block_steps


def study_cost(spec: StudySpec, results: list[RunResult], chosen: dict[tuple[str, int], float]) -> Cost:
    tuned_ids = {(m, d, chosen.get((m, d), spec.shared_lr)) for m, d in spec.cells()}
    finals = [r for r in results if r.kind == "final"]
    tuning = sum(r.steps * r.depth for r in results if r.kind == "tune")
    tuning += sum(r.steps * r.depth for r in finals
                  if (r.method, r.depth, r.lr) not in tuned_ids and r.lr != spec.shared_lr)
    tuned = sum(r.steps * r.depth for r in finals if (r.method, r.depth, r.lr) in tuned_ids)
    shared = sum(r.steps * r.depth for r in finals if r.lr == spec.shared_lr)
    seconds = sum(r.wall_time_s or 0.0 for r in results)
    return Cost(tuning, tuned, shared, seconds, sum(r.steps > 0 for r in results))


def summary_sentences(spec: StudySpec, cells: list[CellResult], metric: Metric, table: str) -> list[str]:
    """One sentence per depth: which methods differ from the reference beyond noise (adjusted), and which do not."""
    unit, digits = metric.difference_unit, metric.digits
    out = []
    for depth in spec.depths:
        groups: dict[str, list[str]] = {"better": [], "worse": [], "within noise": [], "n < 3": [],
                                        "no spread": [], "": []}
        for c in cells:
            if c.table != table or c.depth != depth or c.method == spec.reference_method:
                continue
            kind = verdict(c.diff, metric.higher_is_better, c.p_adj)
            if kind in ("better", "worse"):
                groups[kind].append(f"{c.method} ({format_interval(c.diff, digits, signed=True)} {unit}, "
                                    f"{'Holm' if c.family == PRIMARY else 'BH'}-adjusted p {format_p(c.p_adj)})")
            elif c.diff is None:
                groups[""].append(c.method)
            else:
                groups[kind].append(c.method)
        parts = []
        if groups["better"]:
            parts.append("better than " + spec.reference_method + ": " + ", ".join(groups["better"]))
        if groups["worse"]:
            parts.append("worse than " + spec.reference_method + ": " + ", ".join(groups["worse"]))
        if groups["within noise"]:
            parts.append("within noise of " + spec.reference_method + " (adjusted p ≥ 0.05): "
                         + ", ".join(groups["within noise"]))
        if groups["n < 3"]:
            parts.append("fewer than 3 finished seeds, no interval and no claim: " + ", ".join(groups["n < 3"]))
        if groups["no spread"]:
            parts.append("every seed gave the same difference, so the noise cannot be estimated and no claim is "
                         "made: " + ", ".join(groups["no spread"]))
        if groups[""]:
            parts.append("no result yet: " + ", ".join(groups[""]))
        if parts:
            out.append(f"- Depth {depth}: " + "; ".join(parts) + ".")
    return out


def multiplicity_sentence(cells: list[CellResult], contrasts: list[Contrast], declared: bool = True,
                          exploratory_only: bool = False) -> str:
    """What a 95 % verdict means across this many comparisons, with the study's own counts."""
    compared = [x for x in (*cells, *contrasts) if x.p_raw is not None and not getattr(x, "same_runs_as", "")]
    primary = sum(x.family == PRIMARY for x in compared)
    rest = len(compared) - primary
    if not compared:
        return ("No comparison has a p-value yet (each needs 3 seeds or more with some spread), so no verdict is "
                "called and nothing is adjusted. With more seeds, verdicts are adjusted for multiple comparisons: "
                "Holm (1979) within the primary family, Benjamini & Hochberg (1995) for the rest.")
    family = ("fixed in the design before the runs" if declared else "the default family, applied after the runs")
    if exploratory_only:
        holm = f"the design names no primary family, so all {rest} are exploratory, adjusted together"
    else:
        holm = (f"the {primary} comparison(s) of the primary family, {family}, by Holm (1979; the chance of any "
                f"false verdict among them is at most 5 %), and the other {rest}" if primary else
                f"none of the primary family ({family}) has a p-value yet; the {rest}")
    return (f"This study tests {len(compared)} comparison{'s' if len(compared) != 1 else ''}. At 95 % each one alone "
            f"calls a difference about 1 time in 20 when there is none, so among {len(compared)} equal "
            f"pair{'s' if len(compared) != 1 else ''} about "
            f"{0.05 * len(compared):.1f} would be called by chance. Verdicts are therefore adjusted: {holm} by "
            "Benjamini & Hochberg (1995; at most 5 % of their verdicts expected false if the tests are independent or "
            "positively dependent, Benjamini & Yekutieli 2001 — comparisons sharing a reference's runs are assumed "
            "so, not proven). Intervals are not adjusted: "
            "an interval that excludes 0 with an adjusted p ≥ 0.05 is reported as within noise.")


def primary_lines(spec: StudySpec, cells: list[CellResult], contrasts: list[Contrast], metric: Metric) -> list[str]:
    """The primary family's table: each comparison, its interval (and bootstrap interval), raw and Holm p."""
    if spec.exploratory_only:
        return ["## Primary comparisons", "", "None: the design names no primary family (``--primary none``); every "
                "comparison of this study is exploratory, Benjamini–Hochberg-adjusted.", ""]
    by_key = {("diff", c.method, None, c.depth): c for c in cells if c.table == "tuned"}
    by_key.update({(k.kind, k.method, k.depth_from, k.depth): k for k in contrasts if k.table == "tuned"})
    boot = spec.bootstrap > 0
    when = ("Fixed in the study's design before its runs" if spec.primary_declared else
            "The procedure's default family, applied after this study's runs (its design predates primary families, "
            "so the family was not chosen in advance)")
    lines = ["## Primary comparisons (Holm-adjusted)", "",
             f"{when}: {', '.join(spec.primary)} (``METHOD@DEPTH``: against "
             f"{spec.reference_method} at that depth, tuned table; ``METHOD@A:B``: the depth-use interaction).", "",
             "| comparison | difference [95 % CI] | " + ("two-level bootstrap 95 % | " if boot else "")
             + "p | Holm p | verdict |", "|---|---:|" + ("---:|" if boot else "") + "---:|---:|---|"]
    dashes, interactions = [], False  # cell comparisons left without a bootstrap interval; any interaction row
    for entry in spec.primary:
        item = by_key.get(primary_key(entry))
        if item is None:
            continue
        value = format_interval(item.diff, metric.digits, signed=True)
        row = f"| {entry} | {value} | "
        if boot:
            b = getattr(item, "bootstrap", None)
            row += (f"[{b[0]:+.{metric.digits}f}, {b[1]:+.{metric.digits}f}] | " if b else "— | ")
            dashes += [entry] if b is None and isinstance(item, CellResult) and item.diff is not None else []
            interactions = interactions or isinstance(item, Contrast)
        row += (f"{format_p(item.p_raw)} | {format_p(item.p_adj)} | "
                f"{verdict(item.diff, metric.higher_is_better, item.p_adj)} |")
        lines.append(row)
    if boot:
        lines += ["", f"The bootstrap column resamples seeds and test examples ({spec.bootstrap} draws; "
                      "docs/study.md): it adds the test split's own sampling noise, which the t-interval over seeds "
                      "sees only through the seed-to-seed spread."]
        if interactions:
            lines[-1] += (" The depth-use interactions have none: the bootstrap is drawn for a comparison paired by "
                          "seed and test example at one depth, and an interaction sets two depths' models apart.")
        if dashes:
            lines[-1] += (f" No bootstrap interval for {', '.join(dashes)}: some of the row's paired runs have no "
                          "per-example test outcomes (runs reused unchanged from a study that predates them), and an "
                          "interval over the other seeds alone would describe a different sample than the row's.")
    return lines + [""]


def tuning_lines(spec: StudySpec, tuning, cells: list[CellResult]) -> list[str]:
    """How the rates were chosen: the mode, the ties, the extensions and the cells still at an edge."""
    if not spec.tuned or tuning is None:
        return []
    how = (f"every rate × the {len(spec.seeds)} reported seeds at the full budget, the rate with the best mean "
           "validation score" if spec.tuning == "grid" else
           f"successive halving with {spec.tune_seeds} tuning seed(s) from {spec.min_budget:g} of the budget, the "
           f"rate with the best mean validation score over the seeds")
    lines = ["## Learning-rate choice", "",
             f"Each cell's rate: {how}; rates within one standard error of the best (paired by seed) are a tie, "
             f"resolved toward the shared rate {format_lr(spec.shared_lr)}. Grid: "
             f"{', '.join(format_lr(lr) for lr in spec.lrs)}; a cell whose best mean is at an edge adds one rate "
             f"outward (×3 or ÷3) before the tie rule chooses, at most {spec.extend_grid} time(s). The test split "
             "plays no part.", ""]
    ties = [f"{m} at depth {d} ({', '.join(format_lr(lr) for lr in c.tied)}: {format_lr(c.lr)} taken)"
            for (m, d), c in tuning.choices.items() if c.is_tie]
    lines.append("- Ties: " + ("; ".join(ties) if ties else "none") + ".")
    extended = [f"{m} at depth {d} (added {', '.join(format_lr(lr) for lr in added)}; settled at "
                f"{format_lr(tuning.chosen[(m, d)])})" for (m, d), added in tuning.extended.items() if added]
    lines.append("- Extended: " + ("; ".join(extended) if extended else "none") + ".")
    pending = extension_pending_sentence(tuning)
    if pending:
        lines.append("- " + pending)
    edge = grid_edge_sentence(spec, tuning)
    if edge:
        lines.append("- " + edge)
    return lines + [""]


def extension_pending_sentence(tuning) -> str | None:
    """The cells whose grid extension (their best mean at an edge) has not ended: the rate to add and what the tables
    read until it has. ``None``: none."""
    pending = getattr(tuning, "pending", None) or {}
    cells = []
    for (m, d), added in pending.items():
        choice = tuning.choices.get((m, d))
        tried = [lr for lr in tuning.rates.get((m, d), ()) if lr not in added]
        side = ("largest" if choice.best == max(tried) else "smallest") if choice and tried else None
        reads = (f"until they end, the tables read the tie rule's choice among the rates that ran, "
                 f"{format_lr(choice.lr)}" if choice and tuning.chosen.get((m, d)) is not None
                 else "no rate is chosen until they end")
        cells.append(f"{m} at depth {d} (" + (f"best mean at {format_lr(choice.best)}, the {side} tried; " if side
                                              else "") + f"{', '.join(format_lr(lr) for lr in added)} to run; {reads})")
    if not cells:
        return None
    return ("Extension pending (the best mean at an edge of the rates tried; the added rate's runs have not all "
            "ended): " + "; ".join(cells) + ".")


def grid_edge_sentence(spec: StudySpec, tuning) -> str | None:
    """The cells whose **best mean** is still the smallest or largest rate they tried (after any extension): there
    the best rate may lie beyond the rates tried, whatever the tie rule then took, so the tuned number may understate
    the method (issue 60: a tie pulled inward must not hide an edge). ``None``: none."""
    if not spec.tuned or tuning is None:
        return None
    edges = []
    for (m, d), choice in tuning.choices.items():
        rates = tuning.rates.get((m, d), ())
        if len(rates) > 1 and choice.best in (min(rates), max(rates)):
            side = "largest" if choice.best == max(rates) else "smallest"
            taken = "" if choice.lr == choice.best else f"; the tie rule took {format_lr(choice.lr)}"
            edges.append(f"{m} at depth {d} (best mean at {format_lr(choice.best)}, the {side} tried{taken})")
    if not edges:
        return None
    return ("Best mean still at an edge of the rates tried, where the best rate may lie beyond them (the tuned number "
            "may understate the method there): " + ", ".join(edges) + ".")


def per_seed_lines(spec: StudySpec, cells: list[CellResult], metric: Metric) -> list[str]:
    """Every final run's test value, cell by cell (seeds in order): what each interval was computed from."""
    seeds = spec.all_seeds
    lines = ["## Per-seed values", "", f"{metric.name} of each seed ({', '.join(map(str, seeds))}), in that "
             "order; — for a seed with no value (unfinished or diverged)"
             + (f"; seeds {', '.join(map(str, seeds[len(spec.seeds):]))} only in the primary family's cells"
                if len(seeds) > len(spec.seeds) else "") + ".", ""]
    tables = ["tuned"] + (["shared"] if spec.shared_table and spec.tuned else [])
    for table in tables:
        if len(tables) > 1:
            lines += [f"{'Tuned' if table == 'tuned' else 'Shared'} table:", ""]

        def text(c: CellResult) -> str:
            values = dict(zip(c.seeds, c.test.values)) if c.test else {}
            return ", ".join(f"{values[s]:.{metric.digits}f}" if s in values else "—"
                             for s in spec.seeds_for(c.method, c.depth))

        lines += wide_table(spec, cells, table, text) + [""]
    return lines


def study_markdown(spec: StudySpec, cells: list[CellResult], metric: Metric, cost: Cost,
                   total_steps: int, pending: int, contrasts: list[Contrast] = (), tuning=None,
                   stability: list[dict] | None = None) -> str:
    digits = metric.digits
    seeds = len(spec.seeds)
    kind = "Shape study at a fixed parameter budget" if spec.shapes else "Depth study"
    lines = [f"# {kind}: {', '.join(spec.methods)} at depths {', '.join(map(str, spec.depths))}", "",
             plain_paragraph(spec, cells, metric), ""]
    if pending:
        waiting = (sum(len(added) * len(spec.seeds_for(m, d)) for (m, d), added in tuning.pending.items())
                   if spec.tuning == "grid" and getattr(tuning, "pending", None) else 0)
        why = (f" ({min(waiting, pending)} of them the grid extension of cells whose best mean is at an edge; "
               "\"Learning-rate choice\" below)" if waiting else "")
        lines += [f"**Partial results: {pending} final run(s) not finished yet{why}.** Cells show what has finished.",
                  ""]
    extra = len(spec.all_seeds) - seeds
    over = f"{seeds} seed(s)" + (f" ({len(spec.all_seeds)} in the primary family's cells)" if extra > 0 else "")
    lines += [f"Metric: {metric.name} on the test split, read once per run when it ends; mean over {over} "
              f"with the 95 % t-interval in brackets (fewer than 3 seeds: each seed's value instead). "
              f"Differences are paired by seed against **{spec.reference_method}** at the same depth. Budget: "
              f"{total_steps} steps per run"
              + (f", early stopping after {spec.patience} evaluations without improvement" if spec.patience else "")
              + ". " + TRUNCATION_NOTE, "", multiplicity_sentence(cells, list(contrasts), spec.primary_declared,
                                                                spec.exploratory_only), ""]
    lines += primary_lines(spec, cells, list(contrasts), metric)
    tables = [("tuned", "Each method at its own tuned learning rate")] if spec.tuned else []
    if spec.shared_table or not spec.tuned:
        tables.append(("shared", f"Every method at the shared learning rate {format_lr(spec.shared_lr)}"))
    if spec.fixed:
        tables = [("tuned", "Each method at the learning rate fixed by the design")]
    elif not spec.tuned:
        tables = [("tuned", f"Every method at the learning rate {format_lr(spec.shared_lr)} (not tuned)")]
    for table, title in tables:
        lines += [f"## {title}", ""]
        with_lr = table == "tuned" and (spec.tuned or spec.fixed)
        lines += wide_table(spec, cells, table, lambda c: "tuning not finished" if c.lr is None else
                            format_interval(c.test, digits) + (f" (lr {format_lr(c.lr)})" if with_lr else "")
                            + (f", {c.diverged}/{c.runs} diverged" if c.diverged else ""))
        twins = table != "tuned" and any(c.same_runs_as for c in cells if c.table == table)
        lines += ["", f"Difference against {spec.reference_method} (paired by seed; verdict by adjusted p, "
                      "primary comparisons marked *" + ("; = the same runs as the tuned table's row, counted once"
                                                         if twins else "") + "):", ""]
        lines += wide_table(spec, cells, table, lambda c: "reference" if c.method == spec.reference_method else
                            format_interval(c.diff, digits, signed=True)
                            + f" {verdict(c.diff, metric.higher_is_better, c.p_adj)}"
                            + ("*" if c.family == PRIMARY else "") + (" =" if c.same_runs_as else ""))
        lines += ["", "What the intervals support:", ""]
        lines += summary_sentences(spec, cells, metric, table) or ["- No finished cells yet."]
        lines.append("")
    lines += tuning_lines(spec, tuning, cells)
    lines += depth_use_lines(spec, list(contrasts), metric)
    if stability:
        lines += stability_lines(spec, stability, metric)
    if spec.target is not None:
        shown = f"{spec.target:g}{' %' if metric.classification else ' bits per byte'}"
        lines += [f"## Steps to reach {shown} on the validation split", "",
                  "Mean over the seeds that reached it [95 % CI]; (k/n): k of the n runs that have ended "
                  "reached it.", ""]
        lines += wide_table(spec, cells, "tuned", lambda c: "no run ended yet" if not c.ended else (
            (format_interval(c.steps_to_target, 0) if c.steps_to_target else "not reached")
            + f" ({c.reached_target}/{c.ended})"))
        lines.append("")
    if spec.shapes:
        lines += ["## Shapes at a fixed parameter budget", "",
                  "Each cell's width and exact parameter count (counted on the meta device):", ""]
        lines += wide_table(spec, cells, "tuned", lambda c: f"width {spec.width(c.method, c.depth)}, "
                            + (f"{c.params:,} params" if c.params else "—"))
        lines.append("")
    lines += per_seed_lines(spec, cells, metric)
    ratio = cost.tuned_over_untuned
    lines += ["## Compute", "",
              f"{cost.runs} runs, {cost.total_seconds / 3600:.2f} h of training (sum over runs, one thread each). "
              + (f"Work in block-steps (steps × depth): {cost.tuned_final_block_steps:,} (no tuning: every rate was "
                 "fixed by the design)." if spec.fixed else
                 f"Work in block-steps (steps × depth): tuning {cost.tuning_block_steps:,}, final runs of the tuned "
                 f"table {cost.tuned_final_block_steps:,}, final runs at the shared learning rate "
                 f"{cost.shared_final_block_steps:,}"
                 + (f"; a tuned study costs {ratio:.2f}× an untuned one at the same final budget." if ratio else ".")),
              ""]
    return "\n".join(lines)


def _budget_clause(spec: StudySpec, cells: list[CellResult]) -> str:
    """Under a shape sweep: the parameter budget the widths were chosen for, as the cells counted it."""
    if not spec.shapes:
        return ""
    counts = sorted({c.params for c in cells if c.params})
    if not counts:
        return " at a fixed parameter budget (each method's width chosen per depth)"
    spread = f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,} to {counts[-1]:,}"
    return (f" at a fixed parameter budget, each method's width chosen per depth so that every cell has "
            f"{spread} parameters")


def _selection_clause(spec: StudySpec) -> str:
    if spec.fixed:
        return (", each at the learning rate its design fixed ("
                + ", ".join(f"{m}@{d} {format_lr(lr)}" for m, d, lr in spec.fixed_rates) + ")")
    grid = ", ".join(format_lr(lr) for lr in spec.lrs)
    if spec.tuning == "grid":
        return (f", each at its learning rate chosen from {grid} by the mean validation score of its {len(spec.seeds)} "
                "seeds at the full budget (ties resolved toward the shared rate)")
    seeds = f"{spec.tune_seeds} tuning seed{'s' if spec.tune_seeds != 1 else ''}"
    return (f", each at its learning rate chosen from {grid} on a validation split by successive halving ({seeds} "
            f"from {spec.min_budget:g} of the budget; ties resolved toward the shared rate)")


def plain_paragraph(spec: StudySpec, cells: list[CellResult], metric: Metric) -> str:
    """What the table does and does not show, in plain words, generated from the verdicts and the seed count."""
    table = "tuned"
    compared = [c for c in cells if c.table == table and c.method != spec.reference_method and c.diff is not None]
    verdicts = [verdict(c.diff, metric.higher_is_better, c.p_adj) for c in compared]
    seeds = len(spec.seeds)
    counts = {k: verdicts.count(k) for k in ("better", "worse", "within noise", "n < 3", "no spread")}
    parts = [f"This study compares {len(spec.methods)} residual methods at depths "
             f"{', '.join(map(str, spec.depths))}" + _budget_clause(spec, cells)
             + (_selection_clause(spec) if spec.tuned or spec.fixed
                else f", all at the learning rate {format_lr(spec.shared_lr)}")
             + f", over {seeds} seed{'s' if seeds != 1 else ''}"
             + (f" ({len(spec.all_seeds)} in the primary family's cells)" if len(spec.all_seeds) > seeds else "")
             + "; the test split was read once per final run."]
    if seeds < 3:
        parts.append(f"With {seeds} seed{'s' if seeds != 1 else ''} no interval is formed (Student's t with "
                     f"{max(seeds - 1, 1)} degree of freedom would multiply the standard error by "
                     f"{12.7 if seeds == 2 else 'infinity'}): the tables show each seed's value and make no claim; a "
                     "published comparison needs at least 3 seeds.")
    if compared:
        parts.append(f"Of {len(compared)} comparison{'s' if len(compared) != 1 else ''} against "
                     f"{spec.reference_method} in the tuned table (one per "
                     f"method and depth), {counts['better']} {'is' if counts['better'] == 1 else 'are'} better beyond "
                     f"noise, {counts['worse']} worse beyond noise and {counts['within noise']} within noise after "
                     "adjusting for multiple comparisons"
                     + (f", {counts['n < 3']} had fewer than 3 finished seeds" if counts['n < 3'] else "")
                     + (f", {counts['no spread']} gave the same difference on every seed (no claim)"
                        if counts['no spread'] else "") + ".")
        if counts["within noise"]:
            parts.append("\"Within noise\" means this budget and seed count cannot tell those methods apart from "
                         f"{spec.reference_method}; it does not mean they are equal.")
    parts.append("The result holds for this dataset, model width and step budget; it says nothing about other "
                 "scales.")
    return " ".join(parts)
