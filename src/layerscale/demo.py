"""``layerscale demo``: the first thing to run. A small depth study on scikit-learn's bundled digits (offline):
Pre-LN, LayerScale and ReZero ViTs at a shallow and a deep depth, each tuned over two learning rates on a validation
split — the one with the better mean validation score of its two seeds at the full budget (``--tuning grid``; the
shared rate is one of the two, so the shared table comes with it). With two seeds it prints
each seed's value rather than an interval, and a paragraph generated from the tables saying what they do and do
not show, then where the report is, and last the committed full studies' primary verdicts (read from
``docs/results`` at run time and labelled as such). It is the ``demo`` preset of
``layerscale study`` (its design is fixed in ``layerscale.study.design.presets``, chosen before its result was seen);
re-running it continues (or re-reports) the same study directory."""

from __future__ import annotations

import argparse
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/demo", help="study directory (default: runs/demo)")
    parser.add_argument("--jobs", type=int, help="runs at once (default: one per core)")
    parser.add_argument("--threads", type=int, help="threads per run (default: 1)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (none is drawn anyway when stderr is not a terminal)")


def missing_extras() -> str | None:
    """One line naming every package the demo needs and cannot import, with the one ``pip install`` that brings
    them all (``None`` when nothing is missing): a torch-only install learns it once, not one package a run. The
    demo's study, report included (:mod:`layerscale.study.design.needed_packages`)."""
    from .study.design.needed_packages import missing_packages_line
    from .study.design.presets import get_preset

    return missing_packages_line("the demo", get_preset("demo").spec.base)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .study.design.presets import get_preset
    from .study.study import run_study
    from .terminal import shows_progress

    missing = missing_extras()
    if missing:
        raise ImportError(missing)
    preset = get_preset("demo")
    spec = preset.spec
    print(f"layerscale demo: {preset.description}\nresults in {args.out}", flush=True)
    start = time.perf_counter()
    summary = run_study(spec, Path(args.out), jobs=args.jobs, threads=args.threads,
                        progress=shows_progress(args.no_progress))
    print()
    print(summary.markdown)
    print(f"finished in {time.perf_counter() - start:.0f} s. Report: {summary.paths.get('report')}  "
          f"(tables: {summary.paths['results_md']})")
    from .study.report.committed import primary_verdict_lines

    print("\nWhat the committed full studies found (their primary families, Holm-adjusted; read now from "
          "docs/results, not from this run):")
    for line in primary_verdict_lines():
        print(line)
    return 4 if summary.failures else 0
