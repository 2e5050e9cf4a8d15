"""``layerscale study``: methods × depths × seeds on one dataset and budget, each method at its own tuned learning
rate and at a shared one; tables with 95 % intervals and a report.

Exit status: 0 every run finished (or diverged: a result); 2 bad input (one line, nothing written); 4 some runs
failed (each is listed with its log; the others finished; rerunning the command retries only those).
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_RUNS_FAILED = 4


def _csv_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _int_list(text: str) -> list[int]:
    try:
        return [int(item) for item in _csv_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _float_list(text: str) -> list[float]:
    try:
        return [float(item) for item in _csv_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .presets import PRESETS

    parser.add_argument("--preset", default="fashion", choices=sorted(PRESETS),
                        help="base config and design to start from (default: fashion); every option below "
                             "overrides it")
    parser.add_argument("--methods", type=_csv_list, help="comma-separated residual methods (see layerscale models)")
    parser.add_argument("--depths", type=_int_list, help="comma-separated block counts, e.g. 12,24,48")
    parser.add_argument("--seeds", type=int, help="reported seeds per cell (seeds 0 .. N-1); >= 3 for a result "
                                                  "worth publishing")
    parser.add_argument("--lrs", type=_float_list, metavar="LR,LR,...",
                        help="learning rates to tune over, per method and depth, on the validation split "
                             "(successive halving), e.g. 3e-4,1e-3,3e-3; one value: no tuning")
    parser.add_argument("--lr", type=float, help="the shared learning rate (the table every method gets at one "
                                                 "rate; also the rate of an untuned study)")
    parser.add_argument("--validation-fraction", type=float,
                        help="share of the training split held out (stratified, fixed by data.split_seed) for "
                             "tuning and early stopping; the test split is read only by the final runs")
    parser.add_argument("--reference", help="method the paired differences are taken against (default: prenorm)")
    parser.add_argument("--patience", type=int, help="early stopping: evaluations without improvement of the "
                                                     "validation score before a run ends (0: off)")
    parser.add_argument("--min-delta", type=float, help="early stopping: smallest improvement that counts")
    parser.add_argument("--target", type=float, help="report the steps each run took to reach this validation "
                                                     "accuracy in %% (text: bits per byte)")
    parser.add_argument("--min-budget", type=float, help="successive halving: share of the budget of the first "
                                                         "rung (default 0.25)")
    parser.add_argument("--halving-rate", type=int, help="successive halving: keep the best 1/N at each rung "
                                                         "(default 3)")
    parser.add_argument("--tune-seed", type=int, help="seed of the tuning runs (default 1000; never a reported "
                                                      "seed)")
    parser.add_argument("--no-shared-table", action="store_true",
                        help="skip the final runs at the shared learning rate (only the tuned table)")
    parser.add_argument("--shapes", type=_int_list, metavar="DEPTH,DEPTH,...",
                        help="DepthBench-style sweep at a fixed parameter budget: these depths, each method's width "
                             "chosen so its parameter count is within 5 %% of the budget (replaces --depths)")
    parser.add_argument("--param-budget", type=int, help="--shapes: the parameter budget (default: the model at "
                                                         "--reference-shape)")
    parser.add_argument("--reference-shape", default="12:64", metavar="DEPTH:WIDTH",
                        help="--shapes: the shape whose parameter count is the budget (default 12:64)")
    parser.add_argument("--dataset", help="dataset name (digits, fashion-mnist, mnist, cifar10, text, ...)")
    parser.add_argument("--data-path", dest="data_path",
                        help="data folder (or text file) for the dataset (data.path)")
    parser.add_argument("--data-dir", dest="data_path", help=argparse.SUPPRESS)  # deprecated spelling of --data-path
    parser.add_argument("--epochs", type=int, help="epochs per run (the budget is the same for every run)")
    parser.add_argument("--steps", type=int, help="optimizer steps per run (overrides the preset's max_steps)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the base training config, e.g. --set model.embed_dim=96")
    parser.add_argument("--out", help="study directory (default: runs/study-<preset>); re-run to continue it")
    parser.add_argument("--jobs", type=int, help="runs at once (default: one per core)")
    parser.add_argument("--threads", type=int, help="intra-op threads per run (default: 1)")
    parser.add_argument("--no-report", action="store_true", help="write the tables only, not the HTML report")
    from .executors.cli_args import add_executor_arguments

    add_executor_arguments(parser)  # --executor local|submitit|ray, per-run resources, --dry-run
    parser.add_argument("--analyze", action="store_true",
                        help="after the runs, analyse each final model's depth use (layerscale analyze) and add "
                             "effective depth against nominal depth, per method, to the tables")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: rebuild the tables and report from the run folders as they are")
    parser.add_argument("--estimate", action="store_true",
                        help="train and write nothing: time a few steps of every cell's model on this machine and "
                             "print how long the study's remaining runs will take (an upper bound)")


def build_spec(args: argparse.Namespace):
    """The :class:`StudySpec` the arguments describe (the preset updated by every option given)."""
    from dataclasses import replace

    from ..train.config_file import apply_overrides
    from .presets import get_preset

    preset = get_preset(args.preset)
    shortcuts = []
    if args.dataset is not None:
        shortcuts.append(f"data.name={args.dataset}")
    if args.data_path is not None:
        shortcuts.append(f"data.path={args.data_path}")
    if args.epochs is not None:
        shortcuts += [f"optim.epochs={args.epochs}", "optim.max_steps=0"]
    if args.steps is not None:
        shortcuts.append(f"optim.max_steps={args.steps}")
    if args.lr is not None:
        shortcuts.append(f"optim.lr={args.lr}")
    base = apply_overrides(preset.spec.base, shortcuts + list(args.overrides))
    if args.seeds is not None and not 1 <= args.seeds <= 1000:  # each seed is a run per cell: 10**11 never fits
        raise ValueError(f"--seeds must be in 1..1000 (seeds 0 .. N-1 of every cell), got {args.seeds}")
    changes = {"base": base}
    for option, key in (("methods", "methods"), ("depths", "depths"), ("lrs", "lrs")):
        if getattr(args, option) is not None:
            changes[key] = tuple(getattr(args, option))
    if args.seeds is not None:
        changes["seeds"] = tuple(range(args.seeds))
    for option in ("reference", "validation_fraction", "patience", "min_delta", "target", "min_budget",
                   "halving_rate", "tune_seed"):
        if getattr(args, option) is not None:
            changes[option] = getattr(args, option)
    if args.no_shared_table:
        changes["shared_table"] = False
    if args.shapes is not None:
        changes.update(depths=tuple(args.shapes),
                       shapes=_shapes(base, changes.get("methods", preset.spec.methods), args.shapes,
                                      args.param_budget, args.reference_shape))
    return replace(preset.spec, **changes)


def _shapes(base: dict, methods, depths: list[int], budget: int | None, reference: str):
    """``(method, depth, width)`` for every cell at one parameter budget (widths from the data-filled model)."""
    from ..train.config import TrainConfig
    from ..train.data_setup import load_train_data
    from .shapes import choose_shapes, count_parameters

    try:
        ref_depth, ref_width = (int(v) for v in reference.split(":"))
    except ValueError:
        raise ValueError(f"--reference-shape must be DEPTH:WIDTH, e.g. 12:64, got {reference!r}") from None
    model = dict(base.get("model") or {})
    name = model.pop("name", "vit")
    model.pop("depth", None)
    model.pop("embed_dim", None)
    model.update(load_train_data(TrainConfig.from_dict(base)).model_args)
    if budget is None:  # one budget for every method: the reference shape of the first (the reference) method
        budget = count_parameters(name, {**model, "residual": methods[0], "depth": ref_depth, "embed_dim": ref_width})
    return tuple((method, row.depth, row.width) for method in methods
                 for row in choose_shapes(name, {**model, "residual": method}, depths, budget=budget))


def run(args: argparse.Namespace) -> int:
    import sys

    from .study import run_study

    spec = build_spec(args)
    out = Path(args.out or f"runs/study-{args.preset}")
    from .executors.cli_args import dry_run, executor_options

    executor = executor_options(args, out)
    if args.dry_run:
        print(dry_run(spec, out, executor, args.jobs, args.threads))
        return 0
    if args.estimate:
        from .estimate import estimate_study

        print(estimate_study(spec, out, args.jobs, args.threads))
        return 0
    summary = run_study(spec, out, jobs=args.jobs, threads=args.threads, report=not args.no_report,
                        train=not args.report_only, analyze=args.analyze, executor=executor)
    print(summary.markdown)
    for name, path in summary.paths.items():
        print(f"{name}: {path}")
    if summary.failures:
        print(f"layerscale study: {len(summary.failures)} run(s) failed; the others finished; rerun the same "
              f"command to retry them:", file=sys.stderr)
        for failure in summary.failures:
            print(f"  {failure}", file=sys.stderr)
        return EXIT_RUNS_FAILED
    return 0
