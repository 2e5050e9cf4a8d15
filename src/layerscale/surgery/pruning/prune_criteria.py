"""``layerscale prune --by C1,C2,...``: the criteria compared, the first one's choice pruned, the comparison kept.

Each criterion (:mod:`layerscale.analysis.pruning.criteria`: ``gromov`` — Gromov et al. 2024's contiguous span;
``block_influence`` — ShortGPT's lowest-BI blocks; single-block ``angular``; ``ablation``; ``gamma``) chooses its
``n = 1 … N`` blocks on the calibration split; the loss after each removal is measured on the evaluation split with
its bootstrap interval (:func:`~layerscale.analysis.pruning.criterion_comparison.compare_criteria`). The printed table,
the Markdown / LaTeX tables and one removal-curve figure per criterion (SVG and PDF, with the angular-distance heatmap)
all come from that one comparison (:mod:`~layerscale.analysis.outputs.paper_outputs`); the figures go to
``--report DIR`` (default ``DEST/pruning_report``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ...analysis.options.depth_options import existing_paper_file
from ...analysis.pruning.criteria import CRITERIA, parse_criteria
from ...analysis.pruning.criterion_comparison import CriterionComparison
from ...analysis.summary import ranges

__all__ = ["add_report_arguments", "comparison_lines", "compare_for_pruning", "criteria_option", "report_folder"]


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """``--report DIR`` and ``--bootstrap B`` of ``layerscale prune``."""
    parser.add_argument("--report", default=None, metavar="DIR",
                        help="folder for the criteria comparison: criteria.md / .tex / .json, removal_<criterion>.svg / "
                             ".pdf and angular_heatmap.svg / .pdf (default: DEST/pruning_report)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="B",
                        help="bootstrap replicates over the evaluation examples for the 95%% intervals (default 1000)")


def criteria_option(text: str | None) -> list[str]:
    """``--by`` as a list of criteria (empty without it); a one-line ``ValueError`` naming a bad value."""
    return [] if text is None else parse_criteria(text, CRITERIA, "--by")


def report_folder(args: argparse.Namespace, criteria: list[str]) -> Path:
    """Where the comparison's files go; checked before any work (one line, like DEST). When ``criteria`` are
    compared (files will be written there), a comparison file already in the folder
    (:func:`~layerscale.analysis.options.depth_options.existing_paper_file`) is refused without ``--force``; with it,
    each file is replaced atomically (:func:`~layerscale.analysis.outputs.paper_outputs.write_files`)."""
    if args.bootstrap < 2:
        raise ValueError(f"--bootstrap must be an int >= 2, got {args.bootstrap}")
    if args.bootstrap > 10_000:  # (B, examples) counts held at once, as analyze --bootstrap
        raise ValueError(f"--bootstrap {args.bootstrap}: expected an int in [2, 10000] (bootstrap replicates)")
    folder = Path(args.report) if args.report is not None else Path(args.out) / "pruning_report"
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"--report {folder}: exists and is not a folder")
    existing = existing_paper_file(folder) if criteria and not args.force else None
    if existing is not None:
        raise FileExistsError(f"{existing} already exists; use --force to replace it or choose another --report")
    return folder


def compare_for_pruning(model, scoring, data, criteria: list[str], n: int, args: argparse.Namespace
                        ) -> tuple[list[int], CriterionComparison]:
    """``(blocks the first criterion removes at n, the comparison)`` for ``n = 1 … N`` blocks by every criterion."""
    from ...analysis.pruning.criterion_comparison import compare_criteria

    comparison = compare_criteria(model, data, criteria, n, scoring=scoring, device=args.device,
                                  batch_size=args.batch_size, max_examples=None, bootstrap=args.bootstrap)
    return comparison.curves[criteria[0]].sets[n - 1], comparison


def comparison_lines(comparison: CriterionComparison) -> list[str]:
    """The comparison as text: each criterion's scores, then one row per ``n`` with every criterion's loss change
    (nats) and its interval, and the blocks removed (0-based, as ``--blocks`` takes them)."""
    level = f"{comparison.level:.0%}"
    lines = []
    for name, curve in comparison.curves.items():
        if curve.scores is not None:
            lines.append(f"{name}: scores per block (lower: more removable) "
                         + " ".join(f"{s:.4g}" for s in curve.scores))
    low, high = comparison.clean_loss_interval
    lines.append(f"full model: loss {comparison.clean_loss:.4f} [{low:.4f}, {high:.4f}], accuracy "
                 f"{comparison.clean_accuracy:.4f} ({level} intervals over {comparison.num_examples} evaluation "
                 f"examples; blocks chosen on the {comparison.scoring})")
    lines.append(("  n  " + "  ".join(f"{name + ': Δ loss [interval] blocks':<44}"
                                      for name in comparison.criteria)).rstrip())
    depth_n = len(next(iter(comparison.curves.values())).sets)
    for n in range(depth_n):
        cells = []
        for curve in comparison.curves.values():
            lo, hi = curve.delta_loss_interval[n]
            cells.append(f"{curve.delta_loss[n]:+.4f} [{lo:+.4f}, {hi:+.4f}] {ranges(curve.sets[n]):<14}")
        lines.append((f"{n + 1:>3}  " + "  ".join(f"{c:<44}" for c in cells)).rstrip())
    return lines
