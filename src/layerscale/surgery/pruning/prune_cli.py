"""``layerscale prune SOURCE --remove N --by CRITERION --out DEST [--heal-steps K [--heal full|lora]]``.

Reads SOURCE (the one resolver, :func:`layerscale.sources.read_source`: a training run, our / timm / Hugging Face
model folder, or a folder ``prune`` / ``grow`` wrote), scores its blocks by each criterion given (``--by gromov``,
``block_influence``, ``angular``, ``ablation``, ``gamma``, or several comma-separated, compared in one table with
intervals and a removal-curve figure each, :mod:`~layerscale.surgery.pruning.prune_criteria`: the first decides what is
written) on the **calibration** split, or takes the blocks to remove from ``--blocks i,j``; prints the loss change
on the **evaluation** split, with its bootstrap interval, after each criterion's removal of 1 … N blocks, and writes
the comparison's tables and figures to ``--report`` (default ``DEST/pruning_report``) (:mod:`~layerscale.analysis
.source_data`: a run's splits, an image dataset's train / test, or text through the model's tokenizer in windows);
for a language model read as token windows, the loss and perplexity with 95 % intervals over evaluation windows
before and after pruning (:mod:`~layerscale.analysis.measures.perplexity`); writes DEST without the chosen N blocks, at
the new depth, in the source library's layout, with the source's tokenizer files. ``--heal-steps K`` heals the pruned
model K steps on the calibration split — ``--heal full`` (every weight) or ``--heal lora`` (``peft`` adapters,
merged) by :mod:`~layerscale.surgery.healing.heal_loop`, or, for ``full`` on a training run's own data, through
``layerscale train`` with the run's recipe (:mod:`~layerscale.surgery.healing.prune_heal`) — and heals the unpruned
model alike as the control; the steps printed are the steps run. Arguments, DEST, ``--report`` and ``--heal-out``
(writable, not inside the source: :func:`~layerscale.surgery.pruning.prune_criteria.report_folder`) are checked
before the model is read, ``--lora-rank`` against the model's linears as soon as it is read
(:func:`~layerscale.surgery.healing.lora.check_lora_rank`), all before any data is read or scored; nothing is
written on error, and a report that fails to be written leaves an existing DEST as it was.
"""

from __future__ import annotations

import argparse
import copy

from ...analysis.options.data_options import add_text_arguments, check_data_options
from ...analysis.pruning.criteria import CRITERIA
from ..healing.heal_loop import HEAL_METHODS
from .prune_criteria import (add_report_arguments, check_outside_source, comparison_lines, compare_for_pruning,
                             criteria_option, report_folder, write_with_report)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run directory / checkpoint directory of layerscale train, weights file with "
                                       "--config, or a model folder (ours, timm save_for_hf, Hugging Face, or one "
                                       "prune / grow wrote)")
    parser.add_argument("--remove", type=int, default=None, metavar="N", help="number of blocks to remove (< depth)")
    parser.add_argument("--by", default=None, metavar="CRITERION",
                        help=f"criterion, or several comma-separated, compared in one table with intervals (the "
                             f"first decides): {', '.join(CRITERIA)}")
    parser.add_argument("--blocks", default=None, metavar="I,J",
                        help="remove exactly these blocks (0-based indices) instead of choosing them by a criterion")
    parser.add_argument("--out", required=True, metavar="DEST", help="folder to write the pruned model into")
    parser.add_argument("--data", default=None, help="evaluation dataset name (default: a run's own held-out split)")
    parser.add_argument("--data-path", default=None, help="folder (image datasets) or text / JSONL file (language "
                                                          "models, through --tokenizer)")
    parser.add_argument("--img-size", type=int, default=None, help="image size of --data for a model folder")
    parser.add_argument("--examples", type=int, default=1000, help="evaluation examples used (default 1000)")
    parser.add_argument("--batch-size", type=int, default=250, help="examples per pass (default 250)")
    add_text_arguments(parser)
    parser.add_argument("--heal-steps", type=int, default=0, metavar="K",
                        help="heal the pruned model (and the unpruned control) K steps on the calibration split "
                             "(default 0)")
    parser.add_argument("--heal", default="full", choices=HEAL_METHODS,
                        help="full fine-tuning (default) or LoRA adapters (peft), merged afterwards")
    parser.add_argument("--lora-rank", type=int, default=8, metavar="R", help="rank of the LoRA adapters (default 8)")
    parser.add_argument("--heal-batch-size", type=int, default=8, metavar="B",
                        help="calibration examples per healing step (default 8)")
    parser.add_argument("--heal-lr", type=float, default=None, metavar="LR",
                        help="rate of the healing fine-tune (default: a training run's own peak rate; 1e-4 "
                             "otherwise)")
    parser.add_argument("--heal-out", default=None, metavar="RUN_DIR",
                        help="keep the healing run here (default: a temporary folder, removed)")
    parser.add_argument("--config", default=None, help="training config building the model of a weights file")
    parser.add_argument("--device", default="cpu", help="torch device of the scoring and evaluation (default cpu)")
    parser.add_argument("--force", action="store_true", help="replace DEST if it exists and is not empty")
    add_report_arguments(parser)


def _parse_blocks(text: str) -> list[int]:
    try:
        blocks = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--blocks {text!r}: expected comma-separated block indices, e.g. 3,7") from None
    seen: set[int] = set()
    for block in blocks:  # a repeat is a typo (0,0 for 0,1), not a smaller request
        if block in seen:
            raise ValueError(f"--blocks {text!r}: block {block} is named twice; expected distinct block indices")
        seen.add(block)
    return blocks


def _eval_data(source, args):
    """``(calibration set, evaluation set)`` of ``source``
    (:func:`layerscale.analysis.eval_data.source_data.source_data`); ``(None, None)`` for a model folder given no
    data."""
    return _split(source, args)[:2] if _has_data(source, args) else (None, None)


def _has_data(source, args) -> bool:
    return source.run is not None or args.data is not None or args.data_path is not None


def _split(source, args):
    from ...analysis.options.data_options import data_request
    from ...analysis.eval_data.source_data import source_data

    split = source_data(source, data_request(args, getattr(args, "examples", None)))
    return split.calibration, split.evaluation, split


def run(args: argparse.Namespace) -> int:
    from ..block_list import block_family
    from ..model_files import check_destination_folder, read_source_model
    from ...analysis.device import analysis_device
    from ...analysis.outputs.paper_outputs import comparison_paper_files
    from .prune import prune
    from .prune_healing import heal_with_control, report_perplexity, uses_run_recipe
    from ..surgery_output import finish_write

    criteria = criteria_option(args.by)
    chosen = _parse_blocks(args.blocks) if args.blocks is not None else None
    if chosen is None and not criteria:
        raise ValueError("say which blocks to remove: --by CRITERION with --remove N, or --blocks i,j")
    if criteria:  # the comparison's paper figures: before the model and data are read and scored, not after
        from ...diagnostics.plots import require_matplotlib

        require_matplotlib()
    if chosen is None and args.remove is None:
        raise ValueError("--by needs --remove N, the number of blocks to remove")
    if args.remove is not None and args.remove < 1:
        raise ValueError(f"--remove must be >= 1, got {args.remove}")
    if chosen is not None and args.remove is not None and args.remove != len(set(chosen)):
        raise ValueError(f"--remove {args.remove} but --blocks names {len(set(chosen))} blocks")
    if args.heal_lr is not None and not args.heal_lr > 0:
        raise ValueError(f"--heal-lr must be > 0, got {args.heal_lr}")
    if args.heal_lr is not None and not args.heal_steps:
        raise ValueError("--heal-lr needs --heal-steps K, the number of healing steps")
    for name, value, bound in (("--heal-steps", args.heal_steps, 0), ("--examples", args.examples, 1),
                               ("--batch-size", args.batch_size, 1), ("--lora-rank", args.lora_rank, 1),
                               ("--heal-batch-size", args.heal_batch_size, 1)):
        if value < bound:
            raise ValueError(f"{name} must be >= {bound}, got {value}")
    check_data_options(args)  # --img-size, --seq-len, --samples, as analyze checks them
    analysis_device(args.device)  # a device this machine has, in one line (as analyze), before anything is read
    dest = check_destination_folder(args.out, args.force, args.source)
    report = report_folder(args, criteria)
    if args.heal_out is not None:
        check_outside_source(args.heal_out, args.source, "--heal-out")
        check_destination_folder(args.heal_out, False)
    source = read_source_model(args.source, args.config)
    if args.heal_out is not None and not (args.heal_steps and uses_run_recipe(source, args)):
        raise ValueError("--heal-out keeps the training run of --heal full on a training run's own data; here there is "
                         "no such run (a model folder, --heal lora, or no --heal-steps)")
    if args.tokenizer is not None and source.tokenizer is None:
        source.tokenizer = args.tokenizer  # DEST gets the tokenizer its text was read with
    model = source.model
    depth = len(block_family(model).blocks(model))
    n = len(set(chosen)) if chosen is not None else args.remove
    if n >= depth:
        raise ValueError(f"--remove {n}: {args.source} has {depth} blocks; remove at most {depth - 1} (N < L)")
    block_family(model).check_editable(model)
    if args.heal_steps and args.heal == "lora":  # the rank against the model's linears, before any data or work
        from ..healing.lora import check_lora_rank

        check_lora_rank(model, args.lora_rank)
    needs_data = criteria or args.heal_steps
    scoring, data, split = _split(source, args) if needs_data and _has_data(source, args) else (None, None, None)
    if needs_data and data is None:
        what = f"--by {criteria[0]}" if criteria else "--heal-steps"
        raise ValueError(f"{what} needs evaluation data: give --data / --data-path (a training run uses its own "
                         "splits)")
    for line in split.lines if split is not None else ():
        print(line)
    model.to(args.device)
    tokens = split is not None and split.tokens
    original = copy.deepcopy(model) if args.heal_steps else None
    perplexity = {"unpruned": report_perplexity("unpruned", model, data, args)} if tokens else {}
    paper = {}
    if criteria:
        picked, comparison = compare_for_pruning(model, scoring, data, criteria, n, args)
        chosen = picked if chosen is None else chosen
        print("\n".join(comparison_lines(comparison)))
        paper = comparison_paper_files(comparison)
    pruned = prune(model, chosen, inplace=True)
    surgery = {"operation": "prune", "source": str(args.source), "removed_blocks": sorted(set(chosen)),
               "by": criteria[0] if args.blocks is None else "blocks"}
    if tokens:
        perplexity["pruned"] = report_perplexity("pruned", pruned, data, args)
        surgery["perplexity"] = {name: value.as_dict() for name, value in perplexity.items()}
    if args.heal_steps:
        pruned, record = heal_with_control(pruned, original, source, scoring, data, args, tokens)
        surgery.update(record)
    pruned.cpu()
    if paper:  # a report that fails leaves an existing DEST as it was (prune_criteria.write_with_report)
        lines = write_with_report(report, paper, dest, lambda: finish_write(pruned, source, dest, surgery))
        lines.append(f"wrote the criteria comparison to {report} ({', '.join(sorted(paper))})")
    else:
        lines = finish_write(pruned, source, dest, surgery)
    print(f"removed blocks {sorted(set(chosen))} of {depth}: {depth - n} blocks left")
    for line in lines:
        print(line)
    return 0
