"""The command-line options of the pruning criteria, the set-variant depth and the paper outputs, shared by
``layerscale analyze`` and ``layerscale prune``; each value is checked before any computation, one line naming it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..pruning.criteria import CRITERIA, SCORE_CRITERIA, parse_criteria
from ..pruning.set_depth import AUTO_EXHAUSTIVE_DEPTH, EXHAUSTIVE_MAX_DEPTH, SET_SEARCHES

__all__ = ["PAPER_STEMS", "add_analyze_depth_arguments", "analyze_depth_options", "existing_paper_file",
           "paper_file_entries", "refuse_folder_entries"]

#: The stems of the files :mod:`~layerscale.analysis.outputs.paper_outputs` writes (``removal_<criterion>`` besides).
PAPER_STEMS = ("depth_summary", "depth_blocks", "criteria", "angular_heatmap")


def add_analyze_depth_arguments(parser: argparse.ArgumentParser) -> None:
    """``--by``, ``--set-search``, ``--set-criterion`` of ``layerscale analyze``."""
    parser.add_argument("--by", default=None, metavar="CRITERIA",
                        help="also remove n = 1 ... L-1 blocks by each of these comma-separated criteria and compare "
                             f"them, with intervals, a table and a removal curve each: {', '.join(CRITERIA)}")
    parser.add_argument("--set-search", default="auto", metavar="SEARCH",
                        help=f"search of the set-variant effective depth: {', '.join(SET_SEARCHES)} (default auto: "
                             f"exhaustive for L <= {AUTO_EXHAUSTIVE_DEPTH}, greedy above; exhaustive allowed for "
                             f"L <= {EXHAUSTIVE_MAX_DEPTH})")
    parser.add_argument("--set-criterion", default="ablation", metavar="CRITERION",
                        help=f"order of the greedy set search: {', '.join(SCORE_CRITERIA)} (default ablation)")


def analyze_depth_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of :func:`~layerscale.analysis.analyze_depth` from the options above (a one-line
    ``ValueError`` for a bad value)."""
    if args.set_search not in SET_SEARCHES:
        raise ValueError(f"--set-search {args.set_search!r}: expected one of {', '.join(SET_SEARCHES)}")
    if args.set_criterion not in SCORE_CRITERIA:
        raise ValueError(f"--set-criterion {args.set_criterion!r}: expected one of {', '.join(SCORE_CRITERIA)}")
    criteria = parse_criteria(args.by, CRITERIA, "--by") if args.by is not None else []
    return {"criteria": criteria, "set_search": args.set_search, "set_criterion": args.set_criterion}


def paper_file_entries(out: Path) -> list[Path]:
    """Every entry of ``out`` named as a paper output (a table, a figure, or the comparison's ``criteria.json``),
    whatever it is (a folder there is one a writer cannot replace); empty when ``out`` is no folder."""
    if not out.is_dir():
        return []
    found = []
    for path in sorted(out.iterdir()):
        stem, _, kind = path.name.rpartition(".")
        if kind in ("svg", "pdf", "md", "tex", "json") and (stem in PAPER_STEMS or stem.startswith("removal_")):
            found.append(path)
    return found


def existing_paper_file(out: Path) -> Path | None:
    """A paper output (a table, a figure, or the comparison's ``criteria.json``) already in ``out`` (so that
    ``--force`` is needed), or ``None``."""
    return next(iter(paper_file_entries(out)), None)


def refuse_folder_entries(paths, option: str) -> None:
    """A one-line ``FileExistsError`` for the first of ``paths`` (where an output file goes) that is a folder:
    ``--force`` replaces files, never a folder, and finding that out after the work would be too late."""
    for path in paths:
        if path.is_dir():
            raise FileExistsError(f"{path}: is a folder where an output file goes; --force replaces files only: "
                                  f"remove it or choose another {option}")
