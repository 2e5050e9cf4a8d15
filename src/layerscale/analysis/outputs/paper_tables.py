"""Tables to paste into a paper, in Markdown and LaTeX (``booktabs``), every estimate with its interval.

A cell reads ``estimate [low, high]``: the mean over the evaluation examples and its bootstrap percentile interval
at the stated level (:mod:`layerscale.stats.bootstrap`). Three tables:

* :func:`criteria_table` — a :class:`~layerscale.analysis.pruning.criterion_comparison.CriterionComparison`: one row per
  number of blocks removed ``n``, one column per criterion, the loss change ``Δ(n)`` and the blocks removed;
* :func:`summary_table` — a :class:`~layerscale.analysis.result.DepthAnalysis`'s depths (``D_δ``, the set variant,
  early exit, …) with their intervals;
* :func:`blocks_table` — its per-block measures (ablation ``Δloss``, angular distance, Block Influence).

Each returns ``(markdown, latex)``; the LaTeX is a ``table`` environment with a ``tabular`` (needs
``\\usepackage{booktabs}``), its caption stating the level and what the cells mean.
"""

from __future__ import annotations

from typing import Sequence

from ..pruning.criterion_comparison import CriterionComparison
from ..result import DepthAnalysis
from ..summary import ranges

__all__ = ["blocks_table", "criteria_table", "latex_escape", "summary_table"]

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "δ": r"$\delta$", "Δ": r"$\Delta$", "–": "--", "≤": r"$\le$",
                  "<": r"$<$", ">": r"$>$"}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (and δ, Δ, –, ≤, <, > spelled for LaTeX)."""
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


def _cell(value: float, interval: Sequence[float] | None, digits: int = 3) -> str:
    if interval is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def _depth_cell(value: int | None, interval: Sequence[float] | None) -> str:
    if value is None:
        return "–"
    return f"{value} [{interval[0]:g}, {interval[1]:g}]" if interval else str(value)


def _render(header: list[str], rows: list[list[str]], caption: str, label: str) -> tuple[str, str]:
    md = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    md += ["| " + " | ".join(row) + " |" for row in rows]
    markdown = "\n".join(md) + f"\n\n{caption}\n"
    tex = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{" + "l" * len(header) + "}", r"\toprule",
           " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule"]
    tex += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in rows]
    tex += [r"\bottomrule", r"\end{tabular}", r"\caption{" + latex_escape(caption) + "}",
            r"\label{" + label + "}", r"\end{table}"]
    return markdown, "\n".join(tex) + "\n"


def _units(task: str) -> str:
    """What one evaluation example is: a window of tokens for a language model, else an example."""
    return "windows" if task == "language_model" else "examples"


def criteria_table(comparison: CriterionComparison, tolerance: float | None = None) -> tuple[str, str]:
    """One row per ``n``; per criterion the loss change ``Δ(n)`` (nats) with its interval and the blocks removed
    (1-based). ``tolerance``, when given, is stated in the caption."""
    level = f"{comparison.level:.0%}"
    header = ["n removed"] + [f"{name}: Δ loss" for name in comparison.criteria] + \
        [f"{name}: blocks" for name in comparison.criteria]
    n_max = len(next(iter(comparison.curves.values())).sets) if comparison.curves else 0
    rows = []
    for n in range(n_max):
        row = [str(n + 1)]
        row += [_cell(c.delta_loss[n], c.delta_loss_interval[n]) for c in comparison.curves.values()]
        row += [ranges([b + 1 for b in c.sets[n]]) for c in comparison.curves.values()]
        rows.append(row)
    caption = (f"Loss change (removed minus full model, nats) after removing n of the {comparison.depth} blocks by "
               f"each criterion, mean over {comparison.num_examples} evaluation {_units(comparison.task)} with its "
               f"{level} bootstrap "
               f"interval; full-model loss {_cell(comparison.clean_loss, comparison.clean_loss_interval)}. Blocks "
               f"chosen on the {comparison.scoring}; block numbers 1-based."
               + (f" Tolerance δ = {tolerance:g} nats." if tolerance is not None else ""))
    return _render(header, rows, caption, "tab:pruning-criteria")


def summary_table(result: DepthAnalysis) -> tuple[str, str]:
    """The analysis's depths and loss, each with its interval."""
    s = result.summary
    level = f"{s.level:.0%}"
    rows = [["full-model loss (nats)", _cell(result.clean_loss, result.interval("clean_loss"))],
            ["full-model accuracy", _cell(result.clean_accuracy, result.interval("clean_accuracy"))],
            ["blocks L", str(s.depth)],
            [f"effective depth D_δ (one span, δ = {s.tolerance:g})", _depth_cell(s.effective_depth,
                                                                               s.effective_depth_interval)]]
    if s.set_depth is not None:
        how = s.set_search + (f" by {s.set_criterion}" if s.set_search == "greedy" else "")
        rows.append([f"effective depth, set variant ({how})", _depth_cell(s.set_depth, s.set_depth_interval)])
    lens = "logit-lens" if result.task == "language_model" else "early-exit"
    rows.append([f"{lens} depth K_δ", _depth_cell(s.exit_depth, s.exit_depth_interval)])
    if s.probe_saturation_depth is not None:
        rows.append(["probe-saturation depth", _depth_cell(s.probe_saturation_depth, s.probe_saturation_interval)])
    rows += [[f"near-identity blocks (angular < {s.near_identity:g})",
              _depth_cell(len(s.near_identity_blocks), s.near_identity_interval)],
             ["blocks needed alone (Δ loss > δ)", _depth_cell(len(s.needed_alone_blocks), s.needed_alone_interval)]]
    caption = (f"Depth use of {result.model}" + (f" ({result.residual})" if result.residual else "")
               + f" on {result.num_examples} evaluation {_units(result.task)}; {level} bootstrap intervals in brackets."
               + (" The loss is within 5 % of chance." if s.chance_warning else ""))
    return _render(["measure", "value"], rows, caption, "tab:depth-summary")


def blocks_table(result: DepthAnalysis) -> tuple[str, str]:
    """One row per block: ablation ``Δloss``, angular distance on the token the head reads, Block Influence."""
    level = f"{result.summary.level:.0%}"
    rows = []
    for i in range(result.depth):
        rows.append([str(i + 1),
                     _cell(result.ablation_delta_loss[i], result.interval("ablation_delta_loss", i)),
                     _cell(result.angular_distance[i], result.interval("angular_distance", i), 4),
                     _cell(result.block_influence[i], result.interval("block_influence", i), 4)])
    header = ["block", "ablation Δ loss (nats)", f"angular distance (readout {result.readout})", "Block Influence"]
    caption = (f"Per-block measures of {result.model} on {result.num_examples} evaluation examples, with {level} "
               "bootstrap intervals: the loss change when the block alone is the identity, Gromov et al.'s angular "
               "distance between its input and output, and ShortGPT's Block Influence.")
    return _render(header, rows, caption, "tab:depth-blocks")
