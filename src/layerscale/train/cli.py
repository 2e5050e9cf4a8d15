"""``layerscale train``: train from a config file, or resume a run directory.

Exit status: 0 done; 2 bad input (one line ``layerscale train: error: ...``, nothing written); 3 the run stopped on
a non-finite loss or gradient (the message names the step, the first non-finite block and the last good
checkpoint).
"""

from __future__ import annotations

import argparse
import os
import sys

EXIT_NONFINITE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML or JSON config (see configs/ and docs/training.md)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one key, e.g. --set model.depth=48 --set optim.lr=5e-4 (YAML scalar)")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue RUN_DIR from its latest checkpoint (or from one checkpoint directory)")
    parser.add_argument("--out", metavar="RUN_DIR", help="run directory of a new run (default: run.out_dir, "
                                                          "else runs/<model>-<dataset>-<time>)")


def run(args: argparse.Namespace) -> int:
    from .nonfinite import NonFiniteError
    from .runner import run as run_training

    if args.resume is not None and args.out is not None:
        raise ValueError("--out names a new run; a resumed run continues in its own directory (drop --out)")
    try:
        result = run_training(args.config, overrides=args.overrides, out=args.out, resume=args.resume)
    except NonFiniteError as exc:
        print(f"layerscale train: error: {exc}", file=sys.stderr)
        return EXIT_NONFINITE
    if os.environ.get("RANK", "0") != "0":  # under torchrun only rank 0 reports
        return 0
    metrics = "  ".join(f"{k} {v:.4f}" for k, v in result.metrics.items()
                        if k in ("loss", "accuracy", "perplexity"))
    print(f"done: step {result.step}, {metrics}; checkpoint {result.checkpoint}")
    return 0
