"""Where a model comes from: one resolver for training runs, our / timm / Hugging Face model folders and the
folders the surgery commands write (:mod:`.resolve`), model folders read as hostile input (:mod:`.model_folder`)
and the non-finite-weight refusal (:mod:`.finite`). It sits below :mod:`layerscale.analysis` and
:mod:`layerscale.surgery`, which both import it; it imports neither."""

from .finite import check_finite_model, check_finite_tensors, first_nonfinite
from .resolve import TRAIN_CONFIG_NAME, SourceModel, read_source

__all__ = ["SourceModel", "read_source", "TRAIN_CONFIG_NAME", "check_finite_model", "check_finite_tensors",
           "first_nonfinite"]
