"""``layerscale report RUN_DIR [RUN_DIR ...] [--out report.html]``: one HTML report with figures for the runs."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories written by layerscale train")
    parser.add_argument("--out", default="report.html", metavar="FILE.html",
                        help="the HTML file to write (default: report.html); PNGs go to <stem>_figures/ beside it")
    parser.add_argument("--title", default=None, help="the report's title (default: from the run names)")


def run(args: argparse.Namespace) -> int:
    from .report import write_report

    report = write_report(args.run_dirs, args.out, title=args.title)
    for item in report.runs:
        for note in item.notes:
            print(f"{item.name}: {note}")
    print(f"wrote {report.html_path} ({len(report.figure_paths)} figures, also in "
          f"{report.html_path.parent / (report.html_path.stem + '_figures')})")
    return 0
