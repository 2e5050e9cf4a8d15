"""``layerscale prune --by C1,C2,...``: the criteria compared, the first one's choice pruned, the comparison kept.

Each criterion (:mod:`layerscale.analysis.pruning.criteria`: ``gromov`` — Gromov et al. 2024's contiguous span;
``block_influence`` — ShortGPT's lowest-BI blocks; single-block ``angular``; ``ablation``; ``gamma``) chooses its
``n = 1 … N`` blocks on the calibration split; the loss after each removal is measured on the evaluation split with
its bootstrap interval (:func:`~layerscale.analysis.pruning.criterion_comparison.compare_criteria`). The printed table,
the Markdown / LaTeX tables and one removal-curve figure per criterion (SVG and PDF, with the angular-distance heatmap)
all come from that one comparison (:mod:`~layerscale.analysis.outputs.paper_outputs`); the figures go to
``--report DIR`` (default ``DEST/pruning_report``).

DIR is checked before any work, as DEST is (:func:`report_folder`), and written so that a failure leaves what was on
disk (:func:`write_with_report`): a DEST already there is never replaced by a command whose report then fails.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from ... import atomic_io
from ...analysis.options.depth_options import existing_paper_file, paper_file_entries, refuse_folder_entries
from ...destinations import check_writable_dir
from ...analysis.pruning.criteria import CRITERIA, parse_criteria
from ...analysis.pruning.criterion_comparison import CriterionComparison
from ...analysis.summary import ranges

__all__ = ["add_report_arguments", "check_outside_source", "comparison_lines", "compare_for_pruning", "criteria_option",
           "report_folder", "write_with_report"]


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


def check_outside_source(folder: str | os.PathLike, source: str | os.PathLike, option: str) -> None:
    """A one-line ``ValueError`` when ``folder`` (a secondary output: ``--report``, ``--heal-out``) is the source or
    lies inside it — or inside the training run whose checkpoint the source is — the rule ``--out`` follows
    (:func:`~layerscale.surgery.model_files.check_destination_folder`): the files written there would mix with the
    source's own. A folder holding the source is allowed: files are added to it, nothing of it is replaced."""
    from ..model_files import run_of_checkpoint  # the one rule of --out for a checkpoint's run

    target, origin = Path(folder).resolve(), Path(source).resolve()
    if target == origin:
        raise ValueError(f"{option} {folder} is the source itself; write it to a folder outside the source")
    run = run_of_checkpoint(origin)
    if (run or origin) in target.parents:
        where = f"the run {run} of the source {source}" if run else f"the source {source}"
        raise ValueError(f"{option} {folder} lies inside {where}; its files would mix with the source's own: write "
                         "it to a folder outside it")


def report_folder(args: argparse.Namespace, criteria: list[str]) -> Path:
    """Where the comparison's files go; checked before any work (one line, like DEST). When ``criteria`` are
    compared (files will be written there), the folder must not be or lie inside the source
    (:func:`check_outside_source`), must be one that can be made and written (tried by creating and removing a
    temporary entry: :func:`~layerscale.destinations.check_writable_dir`, as DEST), and must hold no folder where a
    comparison file goes; a comparison file already in it
    (:func:`~layerscale.analysis.options.depth_options.existing_paper_file`) is refused without ``--force``; with it,
    each file is replaced atomically (:func:`write_with_report`)."""
    if args.bootstrap < 2:
        raise ValueError(f"--bootstrap must be an int >= 2, got {args.bootstrap}")
    if args.bootstrap > 10_000:  # (B, examples) counts held at once, as analyze --bootstrap
        raise ValueError(f"--bootstrap {args.bootstrap}: expected an int in [2, 10000] (bootstrap replicates)")
    folder = Path(args.report) if args.report is not None else Path(args.out) / "pruning_report"
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"--report {folder}: exists and is not a folder")
    if not criteria:
        return folder  # nothing is written there
    check_outside_source(folder, args.source, "--report")
    check_writable_dir(folder, "--report folder")
    refuse_folder_entries(paper_file_entries(folder), "--report")
    existing = existing_paper_file(folder) if not args.force else None
    if existing is not None:
        raise FileExistsError(f"{existing} already exists; use --force to replace it or choose another --report")
    return folder


def write_with_report(report: Path, files: dict[str, bytes], dest: Path, write_dest: Callable[[], list[str]]
                      ) -> list[str]:
    """``write_dest()`` (which writes DEST, atomically) and the comparison ``files`` into ``report``, ordered so that
    a failure leaves what was on disk: a report folder outside DEST gets every file staged first (a temporary file
    beside each, :func:`layerscale.atomic_io.atomic_path`), then DEST is written, then the staged files are renamed
    into place — a failure staging them leaves DEST as it was, a failure writing DEST leaves the old report files
    (and removes the folders made for the new ones). A report inside DEST is written after DEST, which replaces
    the old one with the old DEST. Returns ``write_dest()``'s lines."""
    target, inside = report.resolve(), dest.resolve()
    if target == inside or inside in target.parents:
        lines = write_dest()
        from ...analysis.outputs.paper_outputs import write_files

        write_files(report, files)
        return lines
    made = [folder for folder in (report, *report.parents) if not os.path.lexists(folder)]
    try:
        report.mkdir(parents=True, exist_ok=True)
        with ExitStack() as stack:
            for name, data in files.items():
                staged = stack.enter_context(atomic_io.atomic_path(report / name))
                try:
                    staged.write_bytes(data)
                except OSError as exc:  # named by the file it was for, not its temporary
                    raise OSError(exc.errno, exc.strerror or str(exc), str(report / name)) from None
            return write_dest()
    except BaseException:
        for folder in made:  # deepest first; only empty ones go
            try:
                folder.rmdir()
            except OSError:
                pass
        raise


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
