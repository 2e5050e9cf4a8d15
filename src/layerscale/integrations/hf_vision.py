"""Load a Hugging Face ViT (or DeiT) that was saved after :func:`layerscale.add_layerscale`.

``add_layerscale`` turns the output linear of each residual branch of a ``ViTLayer`` (``DeiTLayer``) into a
:class:`~layerscale.surgery.scaled_linear.LayerScaledLinear` with a per-channel scale ``layer_scale``
(docs/interop.md, "Adding LayerScale to a model that lacks it"), and marks the config: ``model_type``
``vit_layerscale`` (:mod:`layerscale.surgery.hf.hf_layerscale_config`), so that no transformers loader builds the
ViT without scales and drops those keys unnoticed (a plain ViT read from such a folder would compute another
function, with only a load report to say so). ``save_pretrained`` writes the scales under transformers' saved
names (``vit.encoder.layer.{i}.attention.output.dense.layer_scale``, ``...output.dense.layer_scale``; transformers
>= 5.9 names the same layers ``attention.o_proj`` / ``mlp.fc2`` in memory). Such a folder loads exactly (γ
included, bit for bit)

* with transformers' own ``AutoModelForImageClassification.from_pretrained(folder)`` (and ``AutoModel`` for the
  backbone of a ``ViTModel`` save) once this module is imported: importing it registers ``vit_layerscale`` with
  ``AutoConfig``, ``AutoModel`` and ``AutoModelForImageClassification`` (:func:`register_auto_classes`; the
  model's class is ``LayerScaleViTForImageClassification``, a ``ViTForImageClassification`` that adds the scales
  when it is built). Without the import those calls fail with transformers' "does not recognize this
  architecture", and a concrete class (``ViTForImageClassification``) always fails: never a model without its
  scales. ``deit_layerscale`` is registered with ``AutoConfig`` and ``AutoModel`` only (see
  :data:`~layerscale.surgery.hf.hf_layerscale_config.MARKED_FAMILIES`);
* with :func:`from_pretrained_with_layerscale` (any class): the usual ``from_pretrained`` for everything else, then
  the same scales added back and filled from the checkpoint (re-exported from
  :mod:`layerscale.surgery.hf.hf_loader`).

A model folded with :func:`layerscale.fold_layerscale` has no scale keys and loads with plain ``from_pretrained``.
"""

from __future__ import annotations

from ..surgery.hf.hf_layerscale_config import families_registered_by
from ..surgery.hf.hf_loader import SCALE_KEY_SUFFIX, from_pretrained_with_layerscale
from ..surgery.hf.scaled_auto_classes import register_scaled_classes

__all__ = ["SCALE_KEY_SUFFIX", "from_pretrained_with_layerscale", "register_auto_classes"]


def register_auto_classes() -> list[str]:
    """Register ``vit_layerscale`` with transformers' ``AutoConfig``, ``AutoModel`` and
    ``AutoModelForImageClassification``, so that their ``from_pretrained`` loads a folder saved after
    ``add_layerscale`` exactly. Idempotent; done when this module is imported. Returns the registered model
    types."""
    return register_scaled_classes(families_registered_by(__name__), __name__)


try:
    import transformers as _transformers  # noqa: F401
except ImportError:  # pragma: no cover - the loader then names the missing extra
    pass
else:
    register_auto_classes()
