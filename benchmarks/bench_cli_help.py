"""Start-up time of ``layerscale --help``: lazy sub-commands against building every sub-command's parser.

``lazy`` runs the installed entry point exactly as a user does (``layerscale --help``); ``eager`` builds the parser
of every sub-command first (``build_parser()`` with no command: each sub-command's module imported, torch with
them), which is what ``layerscale --help`` did before the sub-commands were made lazy. Both run as fresh processes,
alternated, ``--repeats`` times each; the medians and their ratio are printed.

    python benchmarks/bench_cli_help.py --repeats 7
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

EAGER = ("import sys; from layerscale.cli import build_parser\n"
         "try:\n    build_parser().parse_args(['--help'])\nexcept SystemExit:\n    pass")


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    entry = shutil.which("layerscale") or str(__import__("pathlib").Path(sys.executable).with_name("layerscale"))
    lazy, eager = [], []
    for _ in range(args.repeats):
        lazy.append(_seconds([entry, "--help"]))
        eager.append(_seconds([sys.executable, "-c", EAGER]))
    bare = statistics.median(_seconds([sys.executable, "-c", "pass"]) for _ in range(args.repeats))
    lazy_median, eager_median = statistics.median(lazy), statistics.median(eager)
    print(f"python -c pass        median {bare:.3f} s")
    print(f"layerscale --help     median {lazy_median:.3f} s  (min {min(lazy):.3f}, max {max(lazy):.3f})")
    print(f"every parser (before) median {eager_median:.3f} s  (min {min(eager):.3f}, max {max(eager):.3f})")
    print(f"before / after: {eager_median / lazy_median:.1f}x")


if __name__ == "__main__":
    main()
