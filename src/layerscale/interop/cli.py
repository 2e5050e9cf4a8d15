"""``layerscale convert SRC DST``: rename a checkpoint between formats and write it as safetensors, atomically."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .formats import CANONICAL, list_formats

    formats = ", ".join(list_formats())
    parser.add_argument("src", help="checkpoint to read: safetensors, or a PyTorch file (read with weights_only=True)")
    parser.add_argument("dst", help="safetensors file to write")
    parser.add_argument("--from", dest="source", default="auto", metavar="FORMAT",
                        help=f"source format (default: recognised from the keys); one of {formats}")
    parser.add_argument("--to", dest="target", default=CANONICAL, metavar="FORMAT",
                        help=f"target format (default {CANONICAL}); one of {formats}")
    parser.add_argument("--drop", action="append", default=[], metavar="PREFIX",
                        help="leave out keys starting with PREFIX (repeatable), e.g. 'classifier.'")
    parser.add_argument("--model", metavar="NAME", default=None,
                        help="also check that the weights fit our model NAME (see 'layerscale models'): every key "
                             "present, none extra, every shape equal")
    parser.add_argument("--source-config", metavar="CONFIG_JSON", default=None,
                        help="the source's Hugging Face config.json (DINOv2): with --model, its settings that keys "
                             "cannot show (activation, norm eps, heads, ...) are checked against the model")
    parser.add_argument("--force", action="store_true", help="replace DST if it exists")


def check_destination(src: Path, dst: Path, force: bool) -> None:
    """Refuse to overwrite ``dst`` without ``force``, to write over the source file, and to start when ``dst``
    cannot be written (:func:`layerscale.destinations.check_writable_file`)."""
    from ..destinations import check_writable_file

    if dst.exists() and not force:
        raise FileExistsError(f"{dst} exists; pass --force to replace it")
    if src.exists() and dst.exists() and src.resolve() == dst.resolve():
        raise ValueError(f"destination {dst} is the source file; write to another path")
    check_writable_file(dst, "destination")


def check_against_model(state_dict, name: str, source_config=None) -> None:
    """Raise ``ValueError`` listing missing, unexpected or mis-shaped keys of ``state_dict`` (our keys) for model
    ``name`` as ``create_model(name)`` builds it (on the meta device: nothing is allocated), and, given
    ``source_config`` (a config.json path), every setting of :mod:`layerscale.interop.settings` that differs."""
    import torch

    from ..models import create_model
    from .convert import check_fits
    from .settings import compare_settings, config_settings, model_settings

    with torch.device("meta"):
        model = create_model(name)
    if source_config is not None:
        compare_settings(config_settings(source_config), model_settings(model), f"source config {source_config}",
                         f"model {name!r}")
    check_fits(model.state_dict(), state_dict, what=f"the weights do not fit model {name!r}")


def run(args: argparse.Namespace) -> int:
    from .. import __version__
    from ..checkpoint_io import read_state_dict_file, save_safetensors_atomic
    from ..weight_checks import check_finite_tensors
    from .convert import convert_state_dict, convert_with_report

    src, dst = Path(args.src), Path(args.dst)
    if args.source_config is not None and not args.model:
        raise ValueError("--source-config is checked against a model: pass --model NAME too")
    check_destination(src, dst, args.force)
    loaded = read_state_dict_file(src)
    check_finite_tensors(loaded.tensors, str(src))  # as fold does: a NaN weight is no checkpoint to pass on
    tensors, report = convert_with_report(loaded.tensors, args.source, args.target, drop=args.drop)
    if args.model:
        check_against_model(convert_state_dict(loaded.tensors, report.source, "layerscale", drop=args.drop),
                            args.model, args.source_config)
        if args.source_config is not None:
            report.unchecked = []
    where = f", weights under {loaded.container!r}" if loaded.container else ""
    print(f"read {src} ({loaded.file_format}{where}): {len(loaded.tensors)} tensors")
    print(f"format {report.source} -> {report.target}")
    for line in report.lines():
        print(line)
    save_safetensors_atomic(tensors, dst, metadata={"layerscale_key_format": report.target,
                                                    "converted_from": report.source,
                                                    "producer": f"torch-layerscale {__version__}"})
    if args.model:
        print(f"checked: every key and shape fits model {args.model!r}")
    print(f"wrote {dst} (safetensors, {len(tensors)} tensors)")
    return 0
