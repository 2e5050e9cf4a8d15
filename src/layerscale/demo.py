"""``layerscale demo``: the first thing to run. A small depth study on scikit-learn's bundled digits (offline):
Pre-LN, LayerScale, ReZero and Post-LN ViTs at two depths, the same budget each; prints the table and says where the
report is. It is the ``demo`` preset of ``layerscale study``; re-running it continues (or re-reports) the same
study directory."""

from __future__ import annotations

import argparse
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/demo", help="study directory (default: runs/demo)")
    parser.add_argument("--jobs", type=int, help="runs at once (default: one per core)")
    parser.add_argument("--threads", type=int, help="threads per run (default: 1)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .study.grid import StudySpec
    from .study.presets import get_preset
    from .study.study import run_study

    preset = get_preset("demo")
    spec = StudySpec(preset.methods, preset.depths, tuple(range(preset.seeds)), preset.base)
    print(f"layerscale demo: {preset.description}\nmethods {', '.join(spec.methods)}; depths "
          f"{', '.join(map(str, spec.depths))}; results in {args.out}", flush=True)
    start = time.perf_counter()
    summary = run_study(spec, Path(args.out), jobs=args.jobs, threads=args.threads)
    print()
    print(summary.table_markdown)
    print(f"finished in {time.perf_counter() - start:.0f} s. Report: {summary.paths['report']}  "
          f"(table: {summary.paths['results_md']})")
    return 0
