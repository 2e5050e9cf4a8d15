"""``layerscale analyze SOURCE [--data NAME] [--data-path PATH] --out DIR``: depth utilisation of a trained model.

SOURCE is anything :func:`layerscale.sources.read_source` reads: a run directory from ``layerscale train`` (its
latest checkpoint), one of its checkpoint directories, a weights file with ``--config``, our / timm / Hugging Face
model folder, or a folder ``prune`` / ``grow`` wrote. A language model read from a folder is judged on the
evaluation windows of ``--data-path`` through its tokenizer (``--tokenizer``, ``--seq-len``, ``--samples``,
``--text-field``; :mod:`~layerscale.analysis.eval_data.source_data`), and its loss and perplexity with 95 % intervals
over windows are printed. Writes ``analysis.json``, ``analysis.csv`` and ``analysis.html`` into DIR, and prints
the summary. ``--out`` (a folder that can be written, holding no folder where an output file goes) and ``--device``
(one this machine has) are checked before any computation, and everything is computed before anything is written:
bad input writes nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from ..terminal import shows_progress
from .options.data_options import add_text_arguments, check_data_options
from .options.depth_options import (add_analyze_depth_arguments, analyze_depth_options, existing_paper_file,
                                    paper_file_entries, refuse_folder_entries)

OUTPUT_FILES = ("analysis.json", "analysis.csv", "analysis.html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run directory, checkpoint directory (RUN/checkpoints/step_N), weights file "
                                       "with --config, or a model folder (ours, timm save_for_hf, Hugging Face, or "
                                       "one prune / grow wrote)")
    parser.add_argument("--out", required=True, help="folder for analysis.json, analysis.csv and analysis.html")
    parser.add_argument("--data", default=None,
                        help="evaluation dataset name (default: the run's own held-out split); text for a language "
                             "model")
    parser.add_argument("--data-path", default=None, help="folder (image datasets) or text file (language models)")
    parser.add_argument("--img-size", type=int, default=None, help="image size of --data for a model folder "
                                                                  "(default: the model's)")
    add_text_arguments(parser)
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
    add_analyze_depth_arguments(parser)
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (none is drawn anyway when stderr is not a terminal)")


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
    from . import source
    from .options.data_options import data_request
    from .device import analysis_device
    from .outputs.paper_outputs import analysis_paper_files, write_files
    from .outputs.report import analysis_page

    from ..diagnostics.plots import require_matplotlib

    check_data_options(args)
    require_matplotlib()  # the page's figures: before the passes over the data, not after them
    depth_options = analyze_depth_options(args)
    if not 2 <= args.bootstrap <= 10_000:  # (B, examples) counts held at once: 10,000 x 10,000 are 0.8 GB
        raise ValueError(f"--bootstrap {args.bootstrap}: expected an int in [2, 10000] (bootstrap replicates)")
    out = Path(args.out)
    check_writable_folder(out)
    refuse_folder_entries([out / name for name in OUTPUT_FILES] + paper_file_entries(out), "--out")
    existing = [name for name in OUTPUT_FILES if (out / name).exists()]
    existing += [path.name for path in [existing_paper_file(out)] if path is not None]
    if existing and not args.force:
        raise FileExistsError(f"{out / existing[0]} already exists; use --force to replace it or choose another "
                              "--out")
    device = analysis_device(args.device or "cpu")
    request = data_request(args, args.examples)
    result = source.analyze_run(args.source, args.data, args.data_path, args.config, text=request.text,
                                img_size=args.img_size, max_examples=args.examples, batch_size=args.batch_size,
                                tolerance=args.tolerance, spans=args.spans, near_identity=args.near_identity,
                                probes=not args.no_probes, probe_splits=args.probe_splits, cka=args.cka,
                                cka_tokens=args.cka_tokens, bootstrap=args.bootstrap, device=device,
                                progress=shows_progress(args.no_progress), **depth_options)
    html, paper = analysis_page(result), analysis_paper_files(result)
    try:
        paths = result.write(out, html=html)
        paths.update({p.name: p for p in write_files(out, paper)})
    except OSError as exc:
        raise ValueError(f"{out}: cannot write the analysis ({exc.strerror or exc})") from None
    print(f"{result.model} ({result.residual or 'residual method unknown'}), {result.depth} blocks, "
          f"{result.num_examples} examples: loss {result.clean_loss:.4f}, accuracy {result.clean_accuracy:.4f}")
    for line in result.settings.get("data", ()):
        print(f"  {line}")
    if result.task == "language_model":
        print(f"  {perplexity_line(result)}")
    for line in result.summary.lines:
        print(f"  {line}")
    print(f"wrote {len(paths)} files to {out}: " + ", ".join(p.name for p in paths.values()))
    return 0


def perplexity_line(result) -> str:
    """``exp`` of the mean token loss over the evaluation windows and of its 95 % interval's bounds (the windows are
    the bootstrap's examples, :mod:`~layerscale.analysis.measures.perplexity`)."""
    import math

    low, high = result.intervals["clean_loss"]
    return (f"perplexity {math.exp(result.clean_loss):.4f} [{math.exp(low):.4f}, {math.exp(high):.4f}] "
            f"(exp of the mean token loss; {result.settings['level']:.0%} interval over {result.num_examples} "
            "evaluation windows)")
