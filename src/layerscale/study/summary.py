"""The study's Markdown: the tables a reader compares, and sentences generated from the intervals alone.

Every number printed is a mean over seeds with its 95 % t-interval, or says ``n = 1``. A sentence calls a method
better or worse than the reference only when the paired interval of the difference excludes 0; otherwise it says
"within noise". Nothing here is hand-written about a particular result.
"""

from __future__ import annotations

from dataclasses import dataclass

from .grid import StudySpec, format_lr
from .intervals import Interval, welch_interval
from .results import CellResult, Metric, RunResult, verdict

__all__ = ["Cost", "study_cost", "depth_gain_lines", "format_interval", "grid_edge_sentence", "plain_paragraph",
           "study_markdown", "summary_sentences"]


def format_interval(interval: Interval | None, digits: int, signed: bool = False) -> str:
    """``86.1 [85.2, 87.0]``; ``86.1 (n = 1)`` without an interval; ``—`` without a value."""
    if interval is None:
        return "—"
    sign = "+" if signed else ""
    mean = f"{interval.mean:{sign}.{digits}f}"
    if interval.low is None:
        return f"{mean} (n = 1)"
    return f"{mean} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


@dataclass(frozen=True)
class Cost:
    """Compute of the study: steps and block-steps (steps × depth, proportional to the work) and training seconds,
    for the tuning runs, the final runs of the tuned table, and the final runs of the shared table (what an untuned
    study costs)."""

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
    tuning = sum(r.steps * r.depth for r in results if r.kind == "tune")
    tuned = sum(r.steps * r.depth for r in results if r.kind == "final" and (r.method, r.depth, r.lr) in tuned_ids)
    shared = sum(r.steps * r.depth for r in results if r.kind == "final" and r.lr == spec.shared_lr)
    seconds = sum(r.wall_time_s or 0.0 for r in results)
    return Cost(tuning, tuned, shared, seconds, sum(r.steps > 0 for r in results))


def _wide_table(spec: StudySpec, cells: list[CellResult], table: str, cell_text) -> list[str]:
    lines = ["| method | " + " | ".join(f"depth {d}" for d in spec.depths) + " |",
             "|---|" + "---:|" * len(spec.depths)]
    by_key = {(c.method, c.depth): c for c in cells if c.table == table}
    for method in spec.methods:
        row = [cell_text(by_key[(method, d)]) if (method, d) in by_key else "—" for d in spec.depths]
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    return lines


def summary_sentences(spec: StudySpec, cells: list[CellResult], metric: Metric, table: str) -> list[str]:
    """One sentence per depth: which methods differ from the reference beyond noise, and which do not."""
    unit, digits = metric.difference_unit, metric.digits
    out = []
    for depth in spec.depths:
        groups: dict[str, list[str]] = {"better": [], "worse": [], "within noise": [], "n < 2": [],
                                        "no spread": [], "": []}
        for c in cells:
            if c.table != table or c.depth != depth or c.method == spec.reference_method:
                continue
            kind = verdict(c.diff, metric.higher_is_better)
            if kind in ("better", "worse"):
                groups[kind].append(f"{c.method} ({format_interval(c.diff, digits, signed=True)} {unit})")
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
            parts.append("within noise of " + spec.reference_method + " (the 95 % interval of the difference "
                         "includes 0): " + ", ".join(groups["within noise"]))
        if groups["n < 2"]:
            parts.append("one seed only, no claim: " + ", ".join(groups["n < 2"]))
        if groups["no spread"]:
            parts.append("every seed gave the same difference, so the noise cannot be estimated and no claim is "
                         "made: " + ", ".join(groups["no spread"]))
        if groups[""]:
            parts.append("no result yet: " + ", ".join(groups[""]))
        if parts:
            out.append(f"- Depth {depth}: " + "; ".join(parts) + ".")
    return out


def depth_gain_lines(spec: StudySpec, cells: list[CellResult], metric: Metric) -> list[str]:
    """Under a shape sweep, the question DepthBench asks: does a method turn depth into a better model at the same
    parameter budget? Each method at each depth against itself at the shallowest depth (its first table: tuned
    rates when tuned), by Welch's interval — two depths are two models, so seeds do not pair them."""
    table, shallowest = "tuned", spec.depths[0]
    unit, digits = metric.difference_unit, metric.digits
    by_key = {(c.method, c.depth): c for c in cells if c.table == table}
    gains = {key: welch_interval(cell.test, by_key[(key[0], shallowest)].test)
             for key, cell in by_key.items() if (key[0], shallowest) in by_key}

    def cell_text(cell: CellResult) -> str:
        if cell.depth == shallowest:
            return "reference"
        gain = gains.get((cell.method, cell.depth))
        return format_interval(gain, digits, signed=True) + f" {verdict(gain, metric.higher_is_better)}"

    rate = "its tuned learning rate" if spec.tuned else f"the learning rate {format_lr(spec.shared_lr)}"
    lines = [f"## Depth at the same budget: each method against itself at depth {shallowest}", "",
             f"Difference of each method's {metric.name} at {rate} from its own at depth {shallowest} (the "
             f"shallowest, widest shape). Two depths are two models, so the runs are not paired by seed: the "
             f"intervals are Welch's 95 % t-intervals of the difference of the two cells' means.", ""]
    lines += _wide_table(spec, cells, table, cell_text)
    lines += ["", "What the intervals support:", ""]
    for method in spec.methods:
        groups: dict[str, list[str]] = {"better": [], "worse": [], "within noise": []}
        for depth in spec.depths[1:]:
            gain = gains.get((method, depth))
            kind = verdict(gain, metric.higher_is_better)
            if kind in ("better", "worse"):
                groups[kind].append(f"{depth} ({format_interval(gain, digits, signed=True)} {unit})")
            elif kind == "within noise":
                groups[kind].append(str(depth))
        parts = [f"{kind} than at depth {shallowest} at depth {', '.join(found)}" if kind != "within noise" else
                 f"within noise of depth {shallowest} at depth {', '.join(found)}" for kind, found in groups.items()
                 if found]
        if parts:
            lines.append(f"- {method}: " + "; ".join(parts) + ".")
    return lines + [""]


def grid_edge_sentence(spec: StudySpec, cells: list[CellResult]) -> str | None:
    """The tuned cells whose chosen rate is the smallest or the largest of the grid, in one sentence (``None`` when
    there are none, or with fewer than two rates): there the best rate may lie outside the grid, so the tuned
    table may understate that method at that depth."""
    if not spec.tuned or len(spec.lrs) < 2:
        return None
    low, high = min(spec.lrs), max(spec.lrs)
    edges = [f"{c.method} at depth {c.depth} ({format_lr(c.lr)}, the {'largest' if c.lr == high else 'smallest'})"
             for c in cells if c.table == "tuned" and c.lr in (low, high)]
    if not edges:
        return None
    return ("Chosen at the edge of the learning-rate grid, where the best rate may lie outside it (the tuned "
            "number may understate the method there): " + ", ".join(edges) + ".")


def study_markdown(spec: StudySpec, cells: list[CellResult], metric: Metric, cost: Cost,
                   total_steps: int, pending: int) -> str:
    digits = metric.digits
    seeds = len(spec.seeds)
    kind = "Shape study at a fixed parameter budget" if spec.shapes else "Depth study"
    lines = [f"# {kind}: {', '.join(spec.methods)} at depths {', '.join(map(str, spec.depths))}", "",
             plain_paragraph(spec, cells, metric), ""]
    if pending:
        lines += [f"**Partial results: {pending} final run(s) not finished yet.** Cells show what has finished.", ""]
    lines += [f"Metric: {metric.name} on the test split, read once per run when it ends; mean over {seeds} seed(s) "
              f"with the 95 % t-interval in brackets (\"n = 1\": one run, no interval; intervals are the t formula's, "
              f"not clipped to the metric's range). Differences are paired by "
              f"seed against **{spec.reference_method}** at the same depth. Budget: {total_steps} steps per run"
              + (f", early stopping after {spec.patience} evaluations without improvement" if spec.patience else "")
              + ".", ""]
    tables = [("tuned", "Each method at its own tuned learning rate")] if spec.tuned else []
    if spec.shared_table or not spec.tuned:
        tables.append(("shared", f"Every method at the shared learning rate {format_lr(spec.shared_lr)}"))
    if not spec.tuned:
        tables = [("tuned", f"Every method at the learning rate {format_lr(spec.shared_lr)} (not tuned)")]
    for table, title in tables:
        lines += [f"## {title}", ""]
        with_lr = table == "tuned" and spec.tuned
        lines += _wide_table(spec, cells, table, lambda c: "tuning not finished" if c.lr is None else
                             format_interval(c.test, digits) + (f" (lr {format_lr(c.lr)})" if with_lr else "")
                             + (f", {c.diverged}/{c.runs} diverged" if c.diverged else ""))
        lines += ["", f"Difference against {spec.reference_method} (paired by seed):", ""]
        lines += _wide_table(spec, cells, table, lambda c: "reference" if c.method == spec.reference_method else
                             format_interval(c.diff, digits, signed=True) + f" {verdict(c.diff, metric.higher_is_better)}")
        lines += ["", "What the intervals support:", ""]
        lines += summary_sentences(spec, cells, metric, table) or ["- No finished cells yet."]
        lines.append("")
        edge = grid_edge_sentence(spec, cells) if with_lr else None
        if edge:
            lines += [edge, ""]
    if spec.shapes:
        lines += depth_gain_lines(spec, cells, metric)
    if spec.target is not None:
        shown = f"{spec.target:g}{' %' if metric.classification else ' bits per byte'}"
        lines += [f"## Steps to reach {shown} on the validation split", "",
                  "Mean over the seeds that reached it [95 % CI]; (k/n): k of the n runs that have ended "
                  "reached it.", ""]
        lines += _wide_table(spec, cells, "tuned", lambda c: "no run ended yet" if not c.ended else (
            (format_interval(c.steps_to_target, 0) if c.steps_to_target else "not reached")
            + f" ({c.reached_target}/{c.ended})"))
        lines.append("")
    if spec.shapes:
        lines += ["## Shapes at a fixed parameter budget", "",
                  "Each cell's width and exact parameter count (counted on the meta device):", ""]
        lines += _wide_table(spec, cells, "tuned", lambda c: f"width {spec.width(c.method, c.depth)}, "
                             + (f"{c.params:,} params" if c.params else "—"))
        lines.append("")
    ratio = cost.tuned_over_untuned
    lines += ["## Compute", "",
              f"{cost.runs} runs, {cost.total_seconds / 3600:.2f} h of training (sum over runs, one thread each). "
              f"Work in block-steps (steps × depth): tuning {cost.tuning_block_steps:,}, final runs of the tuned "
              f"table {cost.tuned_final_block_steps:,}, final runs at the shared learning rate "
              f"{cost.shared_final_block_steps:,}"
              + (f"; a tuned study costs {ratio:.2f}× an untuned one at the same final budget." if ratio else "."),
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


def plain_paragraph(spec: StudySpec, cells: list[CellResult], metric: Metric) -> str:
    """What the table does and does not show, in plain words, generated from the verdicts and the seed count."""
    table = "tuned"
    verdicts = [verdict(c.diff, metric.higher_is_better) for c in cells
                if c.table == table and c.method != spec.reference_method and c.diff is not None]
    seeds = len(spec.seeds)
    counts = {k: verdicts.count(k) for k in ("better", "worse", "within noise", "n < 2", "no spread")}
    comparisons = len(verdicts)
    parts = [f"This study compares {len(spec.methods)} residual methods at depths "
             f"{', '.join(map(str, spec.depths))}" + _budget_clause(spec, cells)
             + (f", each at the learning rate it did best with on a validation split (chosen from "
                f"{', '.join(format_lr(lr) for lr in spec.lrs)})" if spec.tuned else
                f", all at the learning rate {format_lr(spec.shared_lr)}")
             + f", over {seeds} seed{'s' if seeds != 1 else ''}; the test split was read once per final run."]
    if seeds < 3:
        parts.append(f"With {seeds} seed{'s' if seeds != 1 else ''} the 95 % intervals are wide"
                     + (" (Student's t with 1 degree of freedom multiplies the standard error by 12.7)"
                        if seeds == 2 else "") + ", so only large differences can show; a published comparison "
                     "needs at least 3 seeds.")
    if comparisons:
        parts.append(f"Of {comparisons} comparisons against {spec.reference_method} (one per method and depth), "
                     f"{counts['better']} {'is' if counts['better'] == 1 else 'are'} better beyond noise, "
                     f"{counts['worse']} worse beyond noise and {counts['within noise']} within noise"
                     + (f", {counts['n < 2']} had too few finished seeds for an interval" if counts['n < 2']
                        else "")
                     + (f", {counts['no spread']} gave the same difference on every seed (no claim)"
                        if counts['no spread'] else "") + ".")
        if counts["within noise"]:
            parts.append("\"Within noise\" means this budget and seed count cannot tell those methods apart from "
                         f"{spec.reference_method}; it does not mean they are equal.")
    parts.append("The result holds for this dataset, model width and step budget; it says nothing about other "
                 "scales.")
    return " ".join(parts)
