"""``layerscale report RUN_DIR [RUN_DIR ...] [--out report.html]``: one HTML report with figures for the runs."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories written by layerscale train")
    parser.add_argument("--out", default="report.html", metavar="FILE.html",
                        help="the HTML file to write (default: report.html); PNGs go to <stem>_figures/ beside it")
    parser.add_argument("--title", default=None, help="the report's title (default: from the run names)")
    parser.add_argument("--force", action="store_true", help="replace FILE.html (and its figures) if it exists")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .report import write_report

    if Path(args.out).exists() and not args.force:
        raise FileExistsError(f"{args.out} exists; pass --force to replace it")
    report = write_report(args.run_dirs, args.out, title=args.title)
    for item in report.runs:
        for note in item.notes:
            print(f"{item.name}: {note}")
    print(f"wrote {report.html_path} ({len(report.figure_paths)} figures, also in "
          f"{report.html_path.parent / (report.html_path.stem + '_figures')})")
    return 0
