"""``layerscale train``: train from a config file, or resume a run directory.

Exit status: 0 done; 2 bad input (one line ``layerscale train: error: ...``, nothing written); 3 the run stopped on
a non-finite loss or gradient (the message names the step, the first non-finite block and the last good
checkpoint).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

#: The training config reference, where a pip install (which has no docs/ folder) can read it.
TRAINING_DOCS = "https://github.com/torch-layerscale/torch-layerscale/blob/main/docs/training.md"
EXIT_BAD_INPUT = 2
EXIT_NONFINITE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .config.config_source import packaged_config_names

    parser.add_argument("--config", metavar="FILE_OR_NAME",
                        help=f"YAML or JSON config file, or the name of a packaged config: "
                             f"{', '.join(packaged_config_names())} (see {TRAINING_DOCS})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one key, e.g. --set model.depth=48 --set optim.lr=5e-4 (YAML scalar)")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue RUN_DIR from its latest checkpoint (or from one checkpoint directory)")
    parser.add_argument("--out", metavar="RUN_DIR", help="run directory of a new run (default: run.out_dir, "
                                                          "else runs/<model>-<dataset>-<time>)")
    parser.add_argument("--data-path", metavar="PATH", help="data folder or text file (data.path); same as "
                                                            "--set data.path=PATH")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar and no step lines (same as --set run.progress=none); without it, a "
                             "bar is drawn only when stderr is a terminal, log lines otherwise")
    parser.add_argument("--print-config", action="store_true",
                        help="print the full resolved config (every key, defaults filled in; without --config: the "
                             "defaults) and exit; model values are checked by building the model on the meta "
                             "device")


#: Seconds a rank other than 0 waits, after a failure, before exiting: torchrun stops every worker as soon as one
#: exits with an error, so rank 0 must be the first, or its one-line message could be cut off.
OTHER_RANKS_GRACE_S = 10.0


def _release_distributed_objects() -> None:
    """Under torchrun, free the run's objects now. The model, its DDP reducer (which holds the process group) and
    the callbacks form reference cycles; left to the interpreter's exit, their C++ destructors run during
    finalisation, where gloo can abort the process ("terminate called without an active exception")."""
    if os.environ.get("WORLD_SIZE", "1") != "1":
        gc.collect()


def _report_failure(message: str, is_main: bool, status: int) -> int:
    """Rank 0 prints the one line and returns ``status`` at once; other ranks return it after a grace period (they
    are normally stopped by torchrun before it ends, once rank 0 has exited). Call it outside the ``except``
    block, so that the exception no longer holds the run's objects."""
    _release_distributed_objects()
    if is_main:
        from ..messages import one_line

        print(f"layerscale train: error: {one_line(message)}", file=sys.stderr, flush=True)
    else:
        time.sleep(OTHER_RANKS_GRACE_S)
    return status


def run(args: argparse.Namespace) -> int:
    from .nonfinite import NonFiniteError
    from .runner import run as run_training

    if args.resume is not None and args.out is not None:
        raise ValueError("--out names a new run; a resumed run continues in its own directory (drop --out)")
    overrides = [*([f"data.path={args.data_path}"] if args.data_path is not None else []), *args.overrides,
                 *(["run.progress=none"] if args.no_progress else [])]
    if args.print_config:
        from .print_config import resolved_config_text

        print(resolved_config_text(args.config, overrides, out=args.out, resume=args.resume), end="")
        return 0
    is_main = os.environ.get("RANK", "0") == "0"  # under torchrun only rank 0 reports
    started = time.perf_counter()
    failure: tuple[str, int] | None = None
    try:
        result = run_training(args.config, overrides=overrides, out=args.out, resume=args.resume)
    except NonFiniteError as exc:
        failure = (str(exc), EXIT_NONFINITE)
    except (ValueError, FileNotFoundError, FileExistsError, ImportError) as exc:
        if os.environ.get("WORLD_SIZE", "1") == "1":
            raise  # one process: the layerscale command prints it (one line, exit 2)
        failure = (str(exc), EXIT_BAD_INPUT)  # every rank meets the same bad input
    if failure is not None:
        message, status = failure
        return _report_failure(message, is_main, status)
    _release_distributed_objects()
    if not is_main:
        return 0
    from .records.run_summary import final_line

    print(final_line(result, time.perf_counter() - started))
    return 0
