"""``layerscale study``: methods × depths × seeds on one dataset and budget, each method at its own tuned learning
rate and at a shared one; tables with 95 % intervals and a report.

Exit status: 0 every run finished (or diverged: a result); 2 bad input (one line, nothing written); 4 some runs
failed (each is listed with its log; the others finished; rerunning the command retries only those).
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_RUNS_FAILED = 4
DEFAULT_PRESET = "fashion"


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


def _duration(text: str) -> float:
    """An argparse ``type`` for ``--start-window``: seconds, from minutes or ``[D-]HH:MM:SS`` (``sbatch --time``)."""
    from .run.executors import parse_slurm_time

    try:
        return parse_slurm_time(text, "--start-window") * 60.0
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _by_preset(presets, value) -> str:
    """``"demo: x, fashion: y, ..."``: ``value(spec)`` of each preset, for a help line that stays true."""
    return ", ".join(f"{name}: {value(preset.spec)}" for name, preset in sorted(presets.items()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .design.presets import PRESETS

    parser.add_argument("--preset", choices=sorted(PRESETS),
                        help="base config and design to start from (default: fashion); every option below "
                             "overrides it. Without --preset and without any design option, a --out folder that "
                             "already holds a study continues the design its study.json records")
    parser.add_argument("--methods", type=_csv_list, help="comma-separated residual methods (see layerscale models)")
    parser.add_argument("--depths", type=_int_list, help="comma-separated block counts, e.g. 12,24,48")
    parser.add_argument("--seeds", type=int, help="reported seeds per cell (seeds 0 .. N-1); >= 3 for a result "
                                                  "worth publishing. The primary family's cells get --primary-seeds "
                                                  "when that is more")
    parser.add_argument("--lrs", type=_float_list, metavar="LR,LR,...",
                        help="learning rates to tune over, per method and depth, on the validation split "
                             "(--tuning), e.g. 3e-4,1e-3,3e-3; one value: no tuning")
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
    parser.add_argument("--tuning", choices=("halving", "grid"),
                        help="how each cell's rate is chosen on the validation split: 'halving' (successive halving "
                             "with --tune-seeds seeds from --min-budget of the budget) or 'grid' (every rate x every "
                             "reported seed at the full budget, chosen by mean validation score); ties (within one "
                             "standard error) go to the shared rate. Default: the preset's ("
                             + _by_preset(PRESETS, lambda spec: spec.tuning if spec.tuned else "untuned") + ")")
    parser.add_argument("--tune-seeds", type=int, help="halving: tuning seeds per rate, scored by their mean "
                                                       "(default 2)")
    parser.add_argument("--min-budget", type=float, help="halving: share of the budget of the first rung "
                                                         "(default 0.5)")
    parser.add_argument("--halving-rate", type=int, help="successive halving: keep the best 1/N at each rung "
                                                         "(default 3)")
    parser.add_argument("--tune-seed", type=int, help="first seed of the tuning runs (default 1000; never a "
                                                      "reported seed)")
    parser.add_argument("--extend-grid", type=int, metavar="N",
                        help="a cell whose best mean is at the smallest or largest rate it tried gets one more "
                             "rate outward (/3 or x3) before the tie rule chooses, at most N times (default 1; 0: "
                             "never)")
    parser.add_argument("--primary", type=_csv_list, metavar="METHOD@DEPTH,...",
                        help="the primary family, fixed before the runs and Holm-adjusted: METHOD@DEPTH (against "
                             "the reference at that depth) or METHOD@SHALLOW:DEEP (depth-use interaction); default: "
                             "every method at the deepest depth; 'none': no primary family, every comparison "
                             "exploratory. Everything else is Benjamini-Hochberg-adjusted")
    parser.add_argument("--primary-seeds", type=int, metavar="N",
                        help="seeds 0 .. N-1 for the cells the primary family compares (the others keep --seeds); "
                             "default: the preset's ("
                             + _by_preset(PRESETS, lambda spec: spec.primary_seeds or "none") + ")")
    parser.add_argument("--bootstrap", type=int, metavar="N",
                        help="add a two-level bootstrap interval (seeds x test examples, N draws) beside the "
                             "t-interval of each primary comparison (default 0: none)")
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
    parser.add_argument("--start-window", type=_duration, metavar="DURATION",
                        help="start runs only during this long from now (minutes, or HH:MM:SS / D-HH:MM:SS as "
                             "sbatch --time); the runs in progress then go on to their end and the tables are "
                             "written as they stand, the rest stay pending for the same command (local executor; "
                             "for a session or an allocation that ends at a known time)")
    parser.add_argument("--no-report", action="store_true", help="write the tables only, not the HTML report")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (none is drawn anyway when stderr is not a terminal)")
    from .run.executors.cli_args import add_executor_arguments

    add_executor_arguments(parser)  # --executor local|submitit|ray, per-run resources, --dry-run
    parser.add_argument("--analyze", action="store_true",
                        help="after the runs, analyse each final model's depth use (layerscale analyze) and add "
                             "effective depth against nominal depth, per method, to the tables")
    parser.add_argument("--reuse-from", metavar="STUDY_DIR",
                        help="before training, copy every finished final run of an earlier study whose config equals "
                             "this design's run of the same id (a redone study keeps what it can)")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: rebuild the tables and report from the run folders as they are")
    parser.add_argument("--estimate", action="store_true",
                        help="train and write nothing: time a few steps of every cell's model on this machine and "
                             "print how long the study's remaining runs will take (an upper bound)")
    # -- packed run folders (layerscale.study.run.archive) ------------------------------------------------------
    parser.add_argument("--pack", action="store_true",
                        help="train nothing: pack the study's runs/ (records, configs, statuses; no checkpoints) "
                             "into runs.tar.xz beside it; --report-only reads that archive when runs/ is absent")
    parser.add_argument("--unpack", action="store_true",
                        help="train nothing: restore runs/ from runs.tar.xz (to continue a packed study)")


def build_spec(args: argparse.Namespace):
    """The :class:`StudySpec` the arguments describe (the preset updated by every option given)."""
    from dataclasses import replace

    from ..train.config.config_file import apply_overrides
    from .design.presets import get_preset

    preset = get_preset(args.preset or DEFAULT_PRESET)
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
                   "halving_rate", "tune_seed", "tuning", "tune_seeds", "extend_grid", "bootstrap",
                   "primary_seeds"):
        if getattr(args, option) is not None:
            changes[option] = getattr(args, option)
    if args.primary == ["none"]:  # no family: the preset's bootstrap and extra seeds (the family's) do not apply
        changes.update(primary=(), exploratory_only=True)
        changes.setdefault("bootstrap", 0)
        changes.setdefault("primary_seeds", 0)
    elif args.primary is not None:
        changes["primary"] = tuple(args.primary)
    elif any(key in changes for key in ("methods", "depths", "reference")) or args.shapes is not None:
        changes["primary"] = ()  # the preset's family names its own grid: the default family of this design
    if args.no_shared_table:
        changes["shared_table"] = False
    if args.shapes is not None:
        changes.update(depths=tuple(args.shapes),
                       shapes=_shapes(base, changes.get("methods", preset.spec.methods), args.shapes,
                                      args.param_budget, args.reference_shape))
    return replace(preset.spec, **changes)


_DESIGN_OPTIONS = ("methods", "depths", "seeds", "lrs", "lr", "validation_fraction", "reference", "patience",
                   "min_delta", "target", "min_budget", "halving_rate", "tune_seed", "tuning", "tune_seeds",
                   "extend_grid", "primary", "bootstrap", "primary_seeds", "shapes", "param_budget", "dataset",
                   "data_path", "epochs", "steps")


def _design_untouched(args: argparse.Namespace) -> bool:
    """Whether no option of the command line changes the preset's design (``--report-only`` then rebuilds the
    study as its ``study.json`` records it, whatever preset it was started from)."""
    return (all(getattr(args, name, None) is None for name in _DESIGN_OPTIONS) and not args.overrides
            and not args.no_shared_table)


def continues_saved_design(args: argparse.Namespace, study_dir: Path) -> bool:
    """Whether the command continues the study ``study_dir`` already holds, as its ``study.json`` records it: no
    ``--preset`` and no design option given, and the folder holds a study. (With any of them the design is the
    command line's, and a folder holding a different study is refused.)"""
    from .design.grid import SPEC_FILE

    return args.preset is None and _design_untouched(args) and (Path(study_dir) / SPEC_FILE).is_file()


def saved_spec(study_dir: Path):
    """The design a study folder records in ``study.json`` (``ValueError`` naming the file when it has none)."""
    from ..untrusted_files import read_json_file
    from .design.grid import SPEC_FILE, StudySpec

    path = study_dir / SPEC_FILE
    try:
        return StudySpec.from_dict(read_json_file(path))
    except FileNotFoundError:
        raise ValueError(f"--report-only: {path} not found; nothing to report (run the study first, or name its "
                         "folder with --out)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a readable study design ({str(exc).splitlines()[0]})") from None


def _shapes(base: dict, methods, depths: list[int], budget: int | None, reference: str):
    """``(method, depth, width)`` for every cell at one parameter budget (widths from the data-filled model)."""
    from ..train.config.schema import TrainConfig
    from ..train.setup.data_setup import load_train_data
    from .design.shapes import choose_shapes, count_parameters

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

    out = Path(args.out or f"runs/study-{args.preset or DEFAULT_PRESET}")
    # -- packed run folders (layerscale.study.run.archive) ------------------------------------------------------
    from .run.archive import pack_runs, refuse_packed, refuse_without_records, unpack_runs

    if args.pack or args.unpack:
        if args.pack and args.unpack:
            raise ValueError("--pack and --unpack: choose one")
        print(pack_runs(out) if args.pack else f"unpacked {unpack_runs(out)}")
        return 0
    action = ("--report-only" if args.report_only else "the dry run" if args.dry_run
              else "--estimate" if args.estimate else "training")
    if args.dry_run or args.estimate:  # refuse what a run refuses (run_study makes these checks first)
        from .study import check_study_paths

        check_study_paths(out, args.reuse_from)
    if not args.report_only:
        refuse_packed(out, action)
    refuse_without_records(out, action)
    if args.report_only and _design_untouched(args):
        spec = saved_spec(out)
    elif continues_saved_design(args, out):
        spec = saved_spec(out)
        from .design.grid import SPEC_FILE

        print(f"continuing the study recorded in {out / SPEC_FILE}", flush=True)
    else:
        spec = build_spec(args)
    from .run.executors.cli_args import dry_run, executor_options

    executor = executor_options(args, out)
    if args.dry_run:
        print(dry_run(spec, out, executor, args.jobs, args.threads))
        return 0
    if args.estimate:
        from .run.estimate import estimate_study

        print(estimate_study(spec, out, args.jobs, args.threads, reuse_from=args.reuse_from))
        return 0
    from ..terminal import shows_progress

    def study(folder: Path):
        return run_study(spec, folder, jobs=args.jobs, threads=args.threads, report=not args.no_report,
                         train=not args.report_only, analyze=args.analyze, executor=executor,
                         reuse_from=args.reuse_from, start_window=args.start_window,
                         progress=shows_progress(args.no_progress))

    from .run.archive import is_packed

    if args.report_only and is_packed(out):  # rebuilt from runs.tar.xz in a temporary copy, then copied back
        from dataclasses import replace

        from .run.archive import relocated, report_from_archive

        if args.analyze:
            raise ValueError("--analyze with a packed study: the analysis needs the checkpoints, which the archive "
                             "does not hold")
        summary, copy = report_from_archive(out, study)
        summary = replace(summary, study_dir=out, paths=relocated(summary.paths, copy, out))
    else:
        summary = study(out)
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
