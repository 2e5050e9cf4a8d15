"""``layerscale analyze SOURCE [--data NAME] [--data-path PATH] --out DIR``: depth utilisation of a trained model.

SOURCE is a run directory from ``layerscale train`` (its latest checkpoint), one of its checkpoint directories, or a
weights file with ``--config``. Writes ``analysis.json``, ``analysis.csv`` and ``analysis.html`` into DIR, and prints
the summary. Everything is computed before anything is written: bad input writes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OUTPUT_FILES = ("analysis.json", "analysis.csv", "analysis.html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run directory, checkpoint directory (RUN/checkpoints/step_N) or weights file")
    parser.add_argument("--out", required=True, help="folder for analysis.json, analysis.csv and analysis.html")
    parser.add_argument("--data", default=None,
                        help="evaluation dataset name (default: the run's own held-out split); text for a language "
                             "model")
    parser.add_argument("--data-path", default=None, help="folder (image datasets) or text file (language models)")
    parser.add_argument("--config", default=None, help="training config building the model of a weights file")
    parser.add_argument("--examples", type=int, default=1000, help="evaluation examples used (default 1000)")
    parser.add_argument("--batch-size", type=int, default=250,
                        help="examples per pass; the stream cache holds (depth+1) x batch x tokens x width values")
    parser.add_argument("--threshold", type=float, default=0.01,
                        help="effective depth counts blocks whose ablation raises the loss by more than this "
                             "fraction of it (default 0.01)")
    parser.add_argument("--near-identity", type=float, default=0.02,
                        help="angular distance under which a block counts as near-identity (default 0.02)")
    parser.add_argument("--no-probes", action="store_true", help="skip the linear probes")
    parser.add_argument("--device", default=None, help="torch device (default: cpu)")
    parser.add_argument("--force", action="store_true", help="replace existing analysis files in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from .report import analysis_page
    from .source import analyze_run

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out}: --out exists and is not a folder")
    existing = [name for name in OUTPUT_FILES if (out / name).exists()]
    if existing and not args.force:
        raise FileExistsError(f"{out / existing[0]} already exists; use --force to replace it or choose another "
                              "--out")
    result = analyze_run(args.source, args.data, args.data_path, args.config, max_examples=args.examples,
                         batch_size=args.batch_size, loss_threshold=args.threshold,
                         near_identity=args.near_identity, probes=not args.no_probes, device=args.device or "cpu",
                         progress=not args.no_progress)
    paths = result.write(out, html=analysis_page(result))
    print(f"{result.model} ({result.residual or 'residual method unknown'}), {result.depth} blocks, "
          f"{result.num_examples} examples: loss {result.clean_loss:.4f}, accuracy {result.clean_accuracy:.4f}")
    for line in result.summary.lines:
        print(f"  {line}")
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
