"""``layerscale fold FOLDER DEST`` for a Hugging Face model folder: the model itself folded
(:func:`~layerscale.surgery.fold_layerscale`) and written as a Hugging Face folder again, which plain
``from_pretrained`` of its Auto class (``AutoModelForCausalLM``, ``AutoModelForImageClassification``) loads with the
folded function.

A key-level fold (:func:`~layerscale.surgery.fold_state_dict`) writes our keys, which no transformers class reads;
so a folder whose ``config.json`` names a ``model_type`` is read by the one source resolver
(:func:`layerscale.sources.read_source`: hostile-folder checks, exact loading, finite weights) and folded as an
object: a scale ``add_layerscale`` retrofitted becomes a plain linear layer and the config loses its
``_layerscale`` mark; a DINOv2 layer keeps ``lambda1 = 1``
(:meth:`~layerscale.surgery.block_families.base.BlockFamily.keep_folded_loadable`). DEST is written atomically
with the source's tokenizer or image processor files, as ``prune`` and ``grow`` write theirs.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fold_model_folder"]


def fold_model_folder(src: str | os.PathLike, dest: str | os.PathLike, force: bool) -> list[str]:
    """Fold the Hugging Face model folder ``src`` into the folder ``dest``; returns the lines to print. A one-line
    ``ValueError`` for a model with no LayerScale, a scale that cannot be folded exactly, or a DEST that exists
    (without ``force``) or holds the source."""
    from ...sources import read_source
    from ..model_files import check_destination_folder
    from ..surgery_output import finish_write
    from .fold import scale_modules

    src, dest = Path(src), Path(dest)
    check_destination_folder(dest, force, src)
    source = read_source(src)
    scales = len(scale_modules(source.model))
    if not scales:
        raise ValueError(f"{src}: {type(source.model).__name__} has no LayerScale to fold")
    lines = finish_write(source.model, source, dest, {"operation": "fold"}, fold=True)
    return [f"read {src} ({type(source.model).__name__}, transformers): folded {scales} scale(s)", *lines]
