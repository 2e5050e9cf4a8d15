"""``layerscale analyze SOURCE [--data NAME] [--data-path PATH] --out DIR``: depth utilisation of a trained model.

SOURCE is a run directory from ``layerscale train`` (its latest checkpoint), one of its checkpoint directories, or a
weights file with ``--config``. Writes ``analysis.json``, ``analysis.csv`` and ``analysis.html`` into DIR, and prints
the summary. ``--out`` (a folder that can be written) and ``--device`` (one this machine has) are checked before any
computation, and everything is computed before anything is written: bad input writes nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
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
    parser.add_argument("--tolerance", type=float, default=0.01,
                        help="δ in nats of the evaluation loss: the effective depth is the fewest blocks left after "
                             "removing one contiguous span whose removal costs at most δ (default 0.01)")
    parser.add_argument("--spans", choices=("angular", "exhaustive"), default="angular",
                        help="span of n blocks removed for the removal curve: Gromov et al.'s smallest angular "
                             "distance (default) or the best of every span (about L³/6 block evaluations)")
    parser.add_argument("--near-identity", type=float, default=0.02,
                        help="angular distance under which a block counts as near-identity (default 0.02)")
    parser.add_argument("--no-probes", action="store_true", help="skip the linear probes")
    parser.add_argument("--probe-splits", type=int, default=5, help="seeded probe splits averaged (default 5)")
    parser.add_argument("--cka", choices=("linear", "debiased"), default="linear",
                        help="CKA estimator: linear (Kornblith et al. 2019) or debiased (unbiased HSIC)")
    parser.add_argument("--cka-tokens", type=int, default=0,
                        help="token-level CKA on at most this many token rows (every token of the first examples); "
                             "default 0: CKA between mean-pooled block outputs")
    parser.add_argument("--bootstrap", type=int, default=1000,
                        help="bootstrap replicates over the examples for the 95%% intervals (default 1000)")
    parser.add_argument("--device", default=None, help="torch device (default: cpu)")
    parser.add_argument("--force", action="store_true", help="replace existing analysis files in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def check_writable_folder(out: Path) -> None:
    """A one-line ``ValueError`` / ``FileExistsError`` unless ``out`` is a folder this process can create files in
    (or can create): tried by creating and removing a temporary entry, so nothing is left behind."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out}: --out exists and is not a folder")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{out}: --out cannot be created ({existing} is not a folder)")
    try:
        probe = tempfile.mkdtemp(prefix=".layerscale-write-check-", dir=existing)
        os.rmdir(probe)
    except OSError as exc:
        raise ValueError(f"{out}: --out cannot be written ({exc.strerror or exc} in {existing})") from None


def run(args: argparse.Namespace) -> int:
    from .device import analysis_device
    from .report import analysis_page
    from .source import analyze_run

    out = Path(args.out)
    check_writable_folder(out)
    existing = [name for name in OUTPUT_FILES if (out / name).exists()]
    if existing and not args.force:
        raise FileExistsError(f"{out / existing[0]} already exists; use --force to replace it or choose another "
                              "--out")
    device = analysis_device(args.device or "cpu")
    result = analyze_run(args.source, args.data, args.data_path, args.config, max_examples=args.examples,
                         batch_size=args.batch_size, tolerance=args.tolerance, spans=args.spans,
                         near_identity=args.near_identity, probes=not args.no_probes, probe_splits=args.probe_splits,
                         cka=args.cka, cka_tokens=args.cka_tokens, bootstrap=args.bootstrap, device=device,
                         progress=not args.no_progress)
    try:
        paths = result.write(out, html=analysis_page(result))
    except OSError as exc:
        raise ValueError(f"{out}: cannot write the analysis ({exc.strerror or exc})") from None
    print(f"{result.model} ({result.residual or 'residual method unknown'}), {result.depth} blocks, "
          f"{result.num_examples} examples: loss {result.clean_loss:.4f}, accuracy {result.clean_accuracy:.4f}")
    for line in result.summary.lines:
        print(f"  {line}")
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
