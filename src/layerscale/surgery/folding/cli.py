"""``layerscale fold SRC DST``: fold the LayerScale of a checkpoint into its linear layers (safetensors out; a
Hugging Face or timm model folder is folded as a model into a folder of the same layout, :mod:`.fold_folder`).

The checkpoint may be in any format ``layerscale convert`` reads; it is converted to our keys, folded
(:func:`layerscale.surgery.fold_state_dict`) and written atomically; a checkpoint holding a NaN or infinite weight
is refused, naming the first such tensor, before anything is written, and so is one read in our key layout holding
a tensor that no model of that layout has (:func:`~layerscale.interop.known_keys.unknown_weight_names`: a crafted
name, a tensor of another model), which would otherwise be copied into DST as it is. The result loads into the same architecture
built without scales, which depends on the method (:func:`~layerscale.surgery.folding.fold_state_dict.folded_target`):
``residual="prenorm"`` (or a timm ViT or DeiT III built with ``init_values=0``) for LayerScale, ``residual="tfixup"`` for ReZero
and SkipInit, whose blocks have no norms.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ...interop.formats import list_formats

    parser.add_argument("src", help="checkpoint to read: safetensors, a PyTorch file (read with weights_only=True), "
                                    "a run directory of layerscale train (its latest checkpoint), or a Hugging Face "
                                    "or timm model folder")
    parser.add_argument("dst", help="safetensors file to write (our keys, no scales); for a Hugging Face or timm "
                                    "folder, the folder to write (same layout: plain from_pretrained or "
                                    "timm.create_model loads it)")
    parser.add_argument("--from", dest="source", default="auto", metavar="FORMAT",
                        help=f"source format (default: recognised from the keys); one of {', '.join(list_formats())}")
    parser.add_argument("--force", action="store_true", help="replace DST if it exists")


def _is_peer_model_folder(path: Path) -> bool:
    """A Hugging Face model folder (``config.json`` with ``model_type``) or a timm one (``architecture`` and
    ``pretrained_cfg``): folded as a model, into a folder."""
    from ...sources.model_folder import folder_kind

    return path.is_dir() and not path.is_symlink() and folder_kind(path)[0] in ("transformers", "timm")


def run(args: argparse.Namespace) -> int:
    from ... import __version__
    from ...checkpoint_io import read_state_dict_file, save_safetensors_atomic
    from ...interop.cli import check_destination
    from ...interop.convert import convert_with_report
    from ...interop.known_keys import unknown_weight_names
    from ...interop.rules import format_keys
    from ...sources.finite import check_finite_tensors
    from .fold_state_dict import fold_state_dict, folded_target

    from ...train.state.run_paths import weights_file

    if _is_peer_model_folder(Path(args.src)):
        from .fold_folder import fold_model_folder

        for line in fold_model_folder(args.src, args.dst, args.force):
            print(line)
        return 0
    src, dst = weights_file(args.src), Path(args.dst)
    check_destination(src, dst, args.force)
    loaded = read_state_dict_file(src)
    check_finite_tensors(loaded.tensors, str(src))
    canonical, report = convert_with_report(loaded.tensors, args.source, "layerscale")
    unknown = unknown_weight_names(canonical) if report.source == "layerscale" else []  # other formats: by table
    if unknown:
        raise ValueError(f"{src}: {len(unknown)} tensor(s) that no model with our keys has (our ViT / CaiT / GPT, "
                         f"timm's ViT) would be copied into {dst} as they are: {format_keys(unknown)}; remove them, "
                         f"or fold the model object with layerscale.surgery.fold_layerscale")
    folded, counts = fold_state_dict(canonical)
    where = f", weights under {loaded.container!r}" if loaded.container else ""
    print(f"read {src} ({loaded.file_format}{where}): {len(loaded.tensors)} tensors, format {report.source}")
    for line in report.notes:
        print(f"  {line}")
    for label, n in sorted(counts.items()):
        print(f"  folded {label}: {n}")
    save_safetensors_atomic(folded, dst, metadata={"layerscale_key_format": "layerscale", "folded": "true",
                                                   "converted_from": report.source,
                                                   "producer": f"torch-layerscale {__version__}"})
    print(f"wrote {dst} (safetensors, {len(folded)} tensors; loads into {folded_target(folded)})")
    return 0
