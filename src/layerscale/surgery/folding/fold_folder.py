"""``layerscale fold FOLDER DEST`` for a Hugging Face or timm model folder: the model itself folded
(:func:`~layerscale.surgery.fold_layerscale`) and written as a folder of the same library again, which that library's
plain loader reads with the folded function: ``from_pretrained`` of the Auto class (``AutoModelForCausalLM``,
``AutoModelForImageClassification``), ``timm.create_model("local-dir:DEST", pretrained=True)``.

A key-level fold (:func:`~layerscale.surgery.fold_state_dict`) writes our keys and no configuration, which neither
library's folder loader reads; so such a folder is read by the one source resolver
(:func:`layerscale.sources.read_source`: hostile-folder checks, exact loading, finite weights) and folded as an
object, then each family keeps what its loader rebuilds
(:meth:`~layerscale.surgery.block_families.base.BlockFamily.keep_folded_loadable`): a scale ``add_layerscale``
retrofitted becomes a plain linear layer and the config loses its ``_layerscale`` mark; a DINOv2 layer keeps
``lambda1 = 1``; a timm ViT / DeiT III is written with ``init_values=0`` (no scales built); a timm CaiT keeps
``gamma_1 = gamma_2 = 1`` (timm always builds them). DEST is written atomically with the source's tokenizer or image
processor files, as ``prune`` and ``grow`` write theirs.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fold_model_folder"]


def fold_model_folder(src: str | os.PathLike, dest: str | os.PathLike, force: bool) -> list[str]:
    """Fold the Hugging Face or timm model folder ``src`` into the folder ``dest``; returns the lines to print. A
    one-line ``ValueError`` for a model with no LayerScale, a scale that cannot be folded exactly, or a DEST that
    exists (without ``force``), holds the source or is named as a safetensors file."""
    from ...sources import read_source
    from ..model_files import check_destination_folder
    from ..surgery_output import finish_write
    from .fold import scale_modules

    src, dest = Path(src), Path(dest)
    if dest.suffix == ".safetensors":
        raise ValueError(f"{src} is a model folder, folded into a folder of the same layout: DST {dest} names a "
                         f"safetensors file; give a folder, or fold the weights file inside it "
                         f"({src / 'model.safetensors'}) into our keys")
    check_destination_folder(dest, force, src)
    source = read_source(src)
    scales = len(scale_modules(source.model))
    if not scales:
        raise ValueError(f"{src}: {type(source.model).__name__} has no LayerScale to fold")
    lines = finish_write(source.model, source, dest, {"operation": "fold"}, fold=True)
    return [f"read {src} ({type(source.model).__name__}, {source.library}): folded {scales} scale(s)", *lines]
