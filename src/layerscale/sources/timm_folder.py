"""A timm model folder (``timm.models.save_for_hf``, or a Hub snapshot of a timm model), read exactly or refused.

``timm.create_model("local-dir:FOLDER", pretrained=True)`` builds the model ``config.json`` describes and then
changes what it loads: it drops a classifier whose size differs from the config's ``num_classes`` (left at its
random initialisation), shifts the classifier's rows by ``pretrained_cfg["label_offset"]``, adapts the first
convolution to another ``in_chans``, runs the model's ``checkpoint_filter_fn`` (which resamples position
embeddings) and loads non-strictly when ``pretrained_strict`` is false (`timm/models/_builder.py`,
``load_pretrained``). Each is right when a user fine-tunes from a checkpoint; for measuring *the* checkpoint each
is a model other than the one saved. So the model is built from ``config.json`` with ``pretrained=False`` (timm's
own architecture and arguments) and filled here, strictly: every weight of the file and no other, each of the
model's shape and of a dtype that loads into it (the check a training run's checkpoint gets:
:func:`~layerscale.train.state.checkpoint.check_same_architecture`), all finite.

The weights file is the one timm prefers (``timm/models/_hub.py``, ``_PREFERRED_FILES``) among those
``save_for_hf`` writes: ``model.safetensors``, else ``pytorch_model.bin`` (read with ``weights_only=True``).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

__all__ = ["TIMM_WEIGHT_FILES", "read_timm_folder"]

#: the weights files ``save_for_hf`` writes, in the order timm reads them
TIMM_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def read_timm_folder(folder: Path) -> nn.Module:
    """The timm model in ``folder`` (module docstring), in eval mode. ``ImportError`` without timm; a one-line
    ``ValueError`` naming the folder when the weights are not exactly those of the model ``config.json`` builds
    (missing, extra, reshaped, of a foreign dtype); ``FileNotFoundError`` when there is no weights file."""
    try:
        import timm
    except ImportError:
        raise ImportError(f"{folder} is a timm model folder; reading it needs timm: pip install timm") from None
    from ..checkpoint_io import read_state_dict_file
    from ..models.validation import check_fits_memory
    from ..train.state.checkpoint import check_same_architecture
    from ..weight_checks import check_finite_tensors

    name = f"local-dir:{folder.resolve()}"
    check_fits_memory(lambda: timm.create_model(name, pretrained=False), f"{folder / 'config.json'}: its model",
                      "loading it", 2, "the model and the file's tensors")  # config.json's sizes, before allocating
    weights = next((folder / f for f in TIMM_WEIGHT_FILES if (folder / f).is_file()), None)
    if weights is None:
        raise FileNotFoundError(f"{folder}: no weights file; expected {' or '.join(TIMM_WEIGHT_FILES)} "
                                "(timm.models.save_for_hf writes them)")
    model = timm.create_model(name, pretrained=False)
    saved = read_state_dict_file(weights).tensors
    check_same_architecture(weights, saved, model.state_dict())  # keys, shapes and dtypes, as a run's checkpoint
    check_finite_tensors(saved, str(weights))
    model.load_state_dict(saved, strict=True)
    return model.eval()
