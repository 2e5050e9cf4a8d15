"""The ``layerscale`` command: one sub-command per module, each exposing ``add_arguments(parser)`` and ``run(args)``."""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import NoReturn

from .suggest import did_you_mean

# sub-command -> (module providing add_arguments/run, one-line help). Adding a command: one line here.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("layerscale.demo", "a small depth study on the bundled digits: 3 methods x 2 depths, tuned learning "
                                "rates, intervals over seeds, a report"),
    "models": ("layerscale.models.cli", "list the model names and residual methods"),
    "train": ("layerscale.train.cli", "train from a YAML/JSON config or resume a run (checkpoints, torchrun DDP / FSDP)"),
    "convert": ("layerscale.interop.cli", "convert checkpoints: timm, official CaiT / DeiT III, HF DINOv2 <-> ours"),
    "fold": ("layerscale.surgery.folding.cli", "fold a checkpoint's LayerScale into its linear layers for deployment"),
    "grow": ("layerscale.surgery.growth.grow_cli", "grow a model deeper: insert blocks gated by LayerScale at γ=G (0: same function)"),
    "prune": ("layerscale.surgery.pruning.prune_cli", "prune a model's blocks chosen by a criterion, optionally heal it, write it shallower"),
    "study": ("layerscale.study.cli", "methods x depths x seeds, each method at its own tuned learning rate: "
                                      "tables with confidence intervals and a report"),
    "report": ("layerscale.diagnostics.cli", "HTML report with figures of runs: curves, LayerScale, per-layer signal"),
    "analyze": ("layerscale.analysis.cli", "depth utilisation of a trained model: ablation, early exit, probes, CKA"),
}


def chosen_command(argv: list[str]) -> str | None:
    """The sub-command named on the command line (the first argument not starting with ``-``), if it is one."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, wrapping lines at spaces only: a URL or a name with hyphens (``torch-layerscale``)
    stays whole, so that a terminal can open the link."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, ``<prog>: error: <what was wrong>; see <prog> --help``, with
    exit status 2 — not the whole usage block (28 lines for ``study``) above it. A value a type check refused
    (``--jobs abc``, ``--start-window 0``) is named in the line; a message that repeats its option
    (``argument --x: --x must ...``) names it once."""

    def error(self, message: str) -> NoReturn:
        from .messages import one_line

        message = re.sub(r"^argument (\S+): \1 ", r"argument \1: ", message)
        self.exit(2, f"{self.prog}: error: {one_line(message)}; see {self.prog} --help\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser. Only ``command``'s module is imported (all of them when ``command`` is ``None``): the other
    sub-commands get their help line from :data:`COMMANDS`, so ``layerscale --help`` imports no module (nor torch)."""
    from . import __version__

    parser = OneLineParser(prog="layerscale", description="Train deeper transformers that stay stable.")
    parser.add_argument("--version", action="version", version=f"torch-layerscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        if command is None or name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(cmd)
            cmd.set_defaults(_run=module.run)
    return parser


def unrecognized(extras: list[str], parser: argparse.ArgumentParser, command: str) -> str:
    """The error for arguments ``command`` does not take: the first unknown option with the closest options of
    ``command`` (``--outt`` → "did you mean --out?"), else the first stray value."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    options = [o for o in sub._option_string_actions if o.startswith("--")]
    flags = [arg for arg in extras if arg.startswith("-") and arg != "-"]
    if flags:
        flag = flags[0].split("=", 1)[0]
        return f"unknown option {flag}{did_you_mean(flag, options)}; see layerscale {command} --help"
    return f"unexpected argument {extras[0]!r}; see layerscale {command} --help"


def main(argv: list[str] | None = None) -> int:
    """Entry point. An unknown sub-command is one line with the closest command names (``layerscale trian`` →
    "did you mean train?") and exit status 2; so is an unknown option (``layerscale train --outt x`` → "did you mean
    --out?"). Expected user errors (``ValueError``, ``FileNotFoundError``,
    ``ImportError`` for a missing extra, and any other ``OSError``: a path the system refuses) print one line
    ``layerscale: error: ...`` (escaped and capped by :func:`~layerscale.messages.one_line`, so no name from a file
    can forge a second line) and exit with status 2; other exceptions propagate."""
    from .messages import one_line

    argv = sys.argv[1:] if argv is None else list(argv)
    command = chosen_command(argv)
    named = next((arg for arg in argv if not arg.startswith("-")), None)
    if command is None and named is not None:  # argparse would list the choices, without a suggestion
        print(f"usage: layerscale COMMAND ...\nlayerscale: error: unknown command {named!r}"
              f"{did_you_mean(named, COMMANDS)}; commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    parser = build_parser(command) if command is not None else build_parser("")
    args, extras = parser.parse_known_args(argv)
    if extras:  # argparse would print the top-level usage and no suggestion (suggest_on_error: Python >= 3.14)
        print(f"layerscale {args.command}: error: {one_line(unrecognized(extras, parser, args.command))}",
              file=sys.stderr)
        return 2
    from .terminal import pipe_safe

    stdout, sys.stdout = sys.stdout, pipe_safe(sys.stdout)  # `layerscale convert A B | head -3` still writes B
    try:
        return int(args._run(args) or 0)
    except (ValueError, FileNotFoundError, FileExistsError, ImportError) as exc:
        print(f"layerscale {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the system refuses (too long a name, EIO on a pseudo file, no permission)
        from .paths import os_error_line

        print(f"layerscale {args.command}: error: {one_line(os_error_line(exc))}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
