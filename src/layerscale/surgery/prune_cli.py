"""``layerscale prune SOURCE --remove N --by CRITERION --out DEST [--heal-steps K]``.

Reads SOURCE (:mod:`layerscale.surgery.model_files`), scores its blocks by each criterion given (``--by gamma``,
``angular``, ``block_influence``, ``ablation``, or several comma-separated: the first decides what is written), or
takes the blocks to remove from ``--blocks i,j``; prints the loss and accuracy after removing the 0 … N most
removable blocks per criterion; writes DEST without the chosen N blocks, at the new depth, in the source library's
layout. ``--heal-steps K`` (a training run as SOURCE) fine-tunes the pruned model K steps with the run's own config
and data through ``layerscale train`` before writing. Arguments and DEST are checked before the model is read;
nothing is written on error.
"""

from __future__ import annotations

import argparse

from .prune import PRUNE_CRITERIA


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run directory / checkpoint directory of layerscale train, weights file with "
                                       "--config, or a model folder (ours, timm save_for_hf, Hugging Face)")
    parser.add_argument("--remove", type=int, default=None, metavar="N", help="number of blocks to remove (< depth)")
    parser.add_argument("--by", default=None, metavar="CRITERION",
                        help=f"criterion, or several comma-separated (the first decides): {', '.join(PRUNE_CRITERIA)}")
    parser.add_argument("--blocks", default=None, metavar="I,J",
                        help="remove exactly these blocks (0-based indices) instead of choosing them by a criterion")
    parser.add_argument("--out", required=True, metavar="DEST", help="folder to write the pruned model into")
    parser.add_argument("--data", default=None, help="evaluation dataset name (default: a run's own held-out split)")
    parser.add_argument("--data-path", default=None, help="folder (image datasets) or text file (language models, "
                                                          "byte tokens)")
    parser.add_argument("--img-size", type=int, default=None, help="image size of --data for a model folder")
    parser.add_argument("--block-size", type=int, default=64, help="tokens per example of text --data (default 64)")
    parser.add_argument("--examples", type=int, default=1000, help="evaluation examples used (default 1000)")
    parser.add_argument("--batch-size", type=int, default=250, help="examples per pass (default 250)")
    parser.add_argument("--heal-steps", type=int, default=0, metavar="K",
                        help="fine-tune the pruned model K steps with the source run's config and data (default 0)")
    parser.add_argument("--heal-lr", type=float, default=None, metavar="LR",
                        help="peak rate of the healing fine-tune (default: the source run's own rate)")
    parser.add_argument("--heal-out", default=None, metavar="RUN_DIR",
                        help="keep the healing run here (default: a temporary folder, removed)")
    parser.add_argument("--config", default=None, help="training config building the model of a weights file")
    parser.add_argument("--device", default="cpu", help="torch device of the scoring and evaluation (default cpu)")
    parser.add_argument("--force", action="store_true", help="replace DEST if it exists and is not empty")


def _parse_blocks(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--blocks {text!r}: expected comma-separated block indices, e.g. 3,7") from None


def _criteria(text: str | None) -> list[str]:
    if text is None:
        return []
    names = [part.strip() for part in text.split(",")]
    for name in names:
        if name not in PRUNE_CRITERIA:
            raise ValueError(f"--by {name!r}: unknown criterion; allowed: {', '.join(PRUNE_CRITERIA)}")
    return names


def _eval_data(source, args):
    """``(scoring set, evaluation set)``. A training run: its held-out split (or --data) is evaluated, and the
    blocks are scored on its validation split when it has one (``data.validation_fraction``), so that the blocks
    are not chosen on the examples they are judged on; else both are the evaluation set. A model folder: --data /
    --data-path for both; ``(None, None)`` without them."""
    from ..analysis.evaluation import as_eval_set

    if source.run is not None:
        from ..analysis.source import load_eval_data
        from ..train.data_setup import load_train_data

        train_data = load_train_data(source.run.config)
        evaluation = as_eval_set(load_eval_data(source.run, args.data, args.data_path, train_data=train_data),
                                 args.examples)
        if args.data is None and args.data_path is None and train_data.validation is not None:
            return as_eval_set(train_data.validation, args.examples), evaluation
        return evaluation, evaluation
    if args.data is None and args.data_path is None:
        return None, None
    language = source.library == "transformers" or hasattr(source.model, "vocab_size")
    if language:
        if args.data_path is None or args.data not in (None, "text"):
            raise ValueError("a language model's evaluation text is given with --data-path FILE (byte tokens)")
        from ..data.text import load_text

        evaluation = as_eval_set(load_text(args.data_path, args.block_size, 0.1).val, args.examples)
        return evaluation, evaluation
    if args.data is None:
        raise ValueError("give the evaluation dataset's name with --data (and its folder with --data-path)")
    from ..data.registry import load_dataset

    bundle = load_dataset(args.data, args.data_path, augment=False, img_size=args.img_size, test_fraction=0.2,
                          seed=0)
    evaluation = as_eval_set(bundle.test, args.examples)
    return evaluation, evaluation


def run(args: argparse.Namespace) -> int:
    from .block_list import block_family
    from .model_files import check_destination_folder, read_source_model
    from .prune import block_scores, blocks_to_remove, prune
    from .prune_eval import evaluate, removal_curve
    from .prune_heal import heal_pruned
    from .surgery_output import finish_write

    criteria = _criteria(args.by)
    chosen = _parse_blocks(args.blocks) if args.blocks is not None else None
    if chosen is None and not criteria:
        raise ValueError("say which blocks to remove: --by CRITERION with --remove N, or --blocks i,j")
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
    for name, value in (("--heal-steps", args.heal_steps), ("--examples", args.examples - 1),
                        ("--batch-size", args.batch_size - 1)):
        if value < 0:
            raise ValueError(f"{name} must be {'>= 0' if name == '--heal-steps' else '>= 1'}")
    dest = check_destination_folder(args.out, args.force, args.source)
    if args.heal_out is not None:
        check_destination_folder(args.heal_out, False)
    source = read_source_model(args.source, args.config)
    if args.heal_steps and source.run is None:
        raise ValueError("--heal-steps needs a training run as SOURCE: its config and data drive the fine-tune")
    model = source.model
    depth = len(block_family(model).blocks(model))
    n = len(set(chosen)) if chosen is not None else args.remove
    if n >= depth:
        raise ValueError(f"--remove {n}: {args.source} has {depth} blocks; remove at most {depth - 1} (N < L)")
    block_family(model).check_editable(model)
    scoring, data = _eval_data(source, args) if (criteria or args.heal_steps) else (None, None)
    if criteria and data is None:
        raise ValueError(f"--by {criteria[0]} needs evaluation data: give --data / --data-path (a training run "
                         f"uses its own held-out split)")
    model.to(args.device)
    for criterion in criteria:
        scores = block_scores(model, scoring, criterion, device=args.device, batch_size=args.batch_size)
        if chosen is None and criterion == criteria[0]:
            chosen = blocks_to_remove(scores, n)
        print(f"{criterion}: scores per block (lower: more removable) "
              + " ".join(f"{s:.4g}" for s in scores))
        print(f"  {'removed':>7}  {'loss':>9}  {'accuracy':>8}  blocks")
        for count, removed, metric in removal_curve(model, scores, n, data, device=args.device,
                                                    batch_size=args.batch_size):
            print(f"  {count:>7}  {metric.loss:>9.4f}  {metric.accuracy:>8.4f}  {removed}")
    pruned = prune(model, chosen, inplace=True)
    surgery = {"operation": "prune", "source": str(args.source), "removed_blocks": sorted(set(chosen)),
               "by": criteria[0] if args.blocks is None else "blocks"}
    if args.heal_steps:
        before = evaluate(pruned, data, device=args.device, batch_size=args.batch_size)
        result = heal_pruned(pruned.cpu(), source, args.heal_steps, args.heal_out, lr=args.heal_lr)
        after = evaluate(pruned.to(args.device), data, device=args.device, batch_size=args.batch_size)
        print(f"healed {args.heal_steps} steps: loss {before.loss:.4f} -> {after.loss:.4f}, accuracy "
              f"{before.accuracy:.4f} -> {after.accuracy:.4f}"
              + (f" (run {result.run_dir})" if args.heal_out else ""))
        surgery.update(heal_steps=args.heal_steps, loss_before_heal=before.loss, loss_after_heal=after.loss,
                       **({"heal_lr": args.heal_lr} if args.heal_lr is not None else {}))
    pruned.cpu()
    lines = finish_write(pruned, source, dest, surgery)
    print(f"removed blocks {sorted(set(chosen))} of {depth}: {depth - n} blocks left")
    for line in lines:
        print(line)
    return 0
