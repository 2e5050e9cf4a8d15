"""``layerscale study``: run methods × depths × seeds on one dataset with one budget, then tabulate and report."""

from __future__ import annotations

import argparse
from pathlib import Path


def _csv_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _int_list(text: str) -> list[int]:
    try:
        return [int(item) for item in _csv_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .presets import PRESETS

    parser.add_argument("--preset", default="fashion", choices=sorted(PRESETS),
                        help="base config, methods, depths and seeds to start from (default: fashion)")
    parser.add_argument("--methods", type=_csv_list, help="comma-separated residual methods (see layerscale models)")
    parser.add_argument("--depths", type=_int_list, help="comma-separated block counts, e.g. 12,24,48")
    parser.add_argument("--seeds", type=int, help="number of seeds per cell (seeds 0 .. N-1)")
    parser.add_argument("--dataset", help="dataset name (digits, fashion-mnist, mnist, cifar10, ...)")
    parser.add_argument("--data-dir", help="data folder for the dataset")
    parser.add_argument("--epochs", type=int, help="epochs per run (the budget is the same for every run)")
    parser.add_argument("--steps", type=int, help="optimizer steps per run (overrides the preset's max_steps)")
    parser.add_argument("--lr", type=float, help="peak learning rate, the same for every run")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the base training config, e.g. --set model.embed_dim=96")
    parser.add_argument("--out", help="study directory (default: runs/study-<preset>); re-run to continue it")
    parser.add_argument("--jobs", type=int, help="runs at once (default: one per core)")
    parser.add_argument("--threads", type=int, help="intra-op threads per run (default: 1)")
    parser.add_argument("--no-report", action="store_true", help="write the tables only, not the HTML report")


def build_spec(args: argparse.Namespace):
    """The :class:`StudySpec` the arguments describe (the preset updated by every option given)."""
    from ..train.config_file import apply_overrides
    from .grid import StudySpec
    from .presets import get_preset

    preset = get_preset(args.preset)
    base = preset.base
    shortcuts = []
    if args.dataset is not None:
        shortcuts.append(f"data.name={args.dataset}")
    if args.data_dir is not None:
        shortcuts.append(f"data.path={args.data_dir}")
    if args.epochs is not None:
        shortcuts += [f"optim.epochs={args.epochs}", "optim.max_steps=0"]
    if args.steps is not None:
        shortcuts.append(f"optim.max_steps={args.steps}")
    if args.lr is not None:
        shortcuts.append(f"optim.lr={args.lr}")
    base = apply_overrides(base, shortcuts + list(args.overrides))
    if args.seeds is not None and args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    seeds = tuple(range(args.seeds if args.seeds is not None else preset.seeds))
    return StudySpec(tuple(args.methods or preset.methods), tuple(args.depths or preset.depths), seeds, base)


def run(args: argparse.Namespace) -> int:
    from .study import run_study

    spec = build_spec(args)
    out = Path(args.out or f"runs/study-{args.preset}")
    summary = run_study(spec, out, jobs=args.jobs, threads=args.threads, report=not args.no_report)
    print(summary.table_markdown)
    for name, path in summary.paths.items():
        print(f"{name}: {path}")
    return 0
