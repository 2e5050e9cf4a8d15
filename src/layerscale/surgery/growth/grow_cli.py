"""``layerscale grow SOURCE --insert K [--where ...] [--init copy|random] [--gamma G] --out DEST``.

Reads SOURCE (a training run, our / timm / Hugging Face model folder, or a folder ``prune`` / ``grow`` wrote:
the one resolver, :func:`layerscale.sources.read_source`; a model with non-finite weights is refused),
inserts K LayerScale-gated blocks (:func:`layerscale.surgery.grow`) and writes DEST in the source library's layout
at the new depth, with the source's tokenizer files. Every argument and DEST are checked before the model is read;
nothing is written on error. From a training run, DEST also gets ``train.yaml``: the run's config at the new depth
with ``run.init_from: DEST``, so ``layerscale train --config DEST/train.yaml --set optim.trainable=new_blocks``
trains only the new blocks.
"""

from __future__ import annotations

import argparse

from .grow import GROW_INITS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run directory / checkpoint directory of layerscale train, weights file with "
                                       "--config, or a model folder (ours, timm save_for_hf, Hugging Face, or one "
                                       "prune / grow wrote)")
    parser.add_argument("--insert", type=int, required=True, metavar="K", help="number of new blocks (>= 1)")
    parser.add_argument("--where", default=None,
                        help="top | every:M (one new block after every M-th block) | after:i,j,... (0-based block "
                             "indices; one new block after each); default every:floor(L/K)")
    parser.add_argument("--init", default="copy", choices=GROW_INITS,
                        help="copy the block a new one follows (default), or fresh random weights")
    parser.add_argument("--gamma", type=float, default=0.0, metavar="G",
                        help="LayerScale of the new blocks' branches (a post-norm decoder's, Gemma 2 / 3 or OLMo 2: "
                             "its post-norms' gain; default 0: exactly the source's function)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --init random (default 0)")
    parser.add_argument("--fold", action="store_true",
                        help="Hugging Face and timm models: fold every LayerScale into its output projection, so "
                             "plain from_pretrained / timm.create_model loads the model with its function (γ=0: zero "
                             "output projections, LLaMA Pro's form); the scales are then no longer separate "
                             "parameters")
    parser.add_argument("--config", default=None, help="training config building the model of a weights file")
    parser.add_argument("--out", required=True, metavar="DEST", help="folder to write the grown model into")
    parser.add_argument("--force", action="store_true", help="replace DEST if it exists and is not empty")


def run(args: argparse.Namespace) -> int:
    from ...layers.layer_scale import check_init_value
    from ...train.config.schema import MAX_SEED
    from .grow import grow
    from ..model_files import check_destination_folder, read_source_model
    from ..surgery_output import finish_write

    if args.insert < 1:
        raise ValueError(f"--insert must be >= 1, got {args.insert}")
    if not 0 <= args.seed <= MAX_SEED:  # as train's run.seed
        raise ValueError(f"--seed must be in [0, 2**63 - 1], got {args.seed}")
    gamma = check_init_value(args.gamma, "--gamma")
    dest = check_destination_folder(args.out, args.force, args.source)
    source = read_source_model(args.source, args.config)
    if args.fold and source.library not in ("transformers", "timm"):
        raise ValueError(f"--fold applies to Hugging Face and timm models; {args.source} is a {source.library} "
                         f"model, whose written folder already loads with its scales")
    model = grow(source.model, args.insert, args.where, args.init, gamma, inplace=True, seed=args.seed)
    if args.fold and not any(block_family(model).branch_scales(block) for block in model_blocks(model)):
        raise ValueError(f"--fold: the grown {type(model).__name__} holds no LayerScale γ to fold (a post-norm "
                         f"decoder's new blocks are scaled by their post-norms' gain), so its folder is plain "
                         f"already; drop --fold")
    surgery = {"operation": "grow", "source": str(args.source), "insert": args.insert, "where": args.where,
               "init": args.init, "gamma": gamma}
    lines = finish_write(model, source, dest, surgery, fold=args.fold)
    print(f"grew {args.source} ({source.library}) to {len(model_blocks(model))} blocks; new blocks "
          f"{list(model.layerscale_new_blocks)} (0-based) with γ={gamma:g}, init {args.init}")
    for line in lines:
        print(line)
    return 0


def model_blocks(model):
    return block_family(model).blocks(model)


def block_family(model):
    from ..block_list import block_family as family

    return family(model)
