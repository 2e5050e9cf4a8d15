"""Load a Hugging Face causal LM that was saved after :func:`layerscale.add_layerscale`.

``add_layerscale`` puts a per-channel scale ``layer_scale`` in the output layer of every residual branch of GPT-2,
Llama-family and parallel-branch models (:mod:`layerscale.surgery.hf.hf_decoder_layers`); ``model.save_pretrained(dir)``
writes those scales beside the other weights (keys ``...c_proj.layer_scale`` / ``...o_proj.layer_scale`` /
``...down_proj.layer_scale``, ...; deliberately not ``gamma``, which some transformers releases rename on load), and
``config.json`` with ``model_type`` ``<type>_layerscale`` (:mod:`layerscale.surgery.hf.hf_layerscale_config`), so
that no transformers loader builds the architecture without scales and drops those keys unnoticed. Such a folder
loads exactly (γ included, bit for bit)

* with transformers' own ``AutoModelForCausalLM.from_pretrained(folder)`` / ``AutoConfig`` once this module is
  imported: importing it registers, for GPT-2 and each Llama-layout family
  (:data:`~layerscale.surgery.hf.hf_layerscale_config.MARKED_FAMILIES`), the marked config class under its
  ``<type>_layerscale`` type and a causal-LM class that adds the scales when it is built
  (:func:`register_auto_classes`; ``LayerScaleLlamaForCausalLM``, ...). Without the import those calls fail with
  transformers' "does not recognize this architecture", and a concrete class (``LlamaForCausalLM``) always fails
  (the mark's guard, :mod:`layerscale.surgery.hf.hf_layerscale_config`): never a model without its scales;
* with :func:`from_pretrained_with_layerscale` (any class, ``AutoModelForCausalLM`` or concrete): the usual
  ``from_pretrained`` for everything else, then the same scales added back and filled from the checkpoint (it lives
  in :mod:`layerscale.surgery.hf.hf_loader`, below the source resolver that uses it, and is re-exported here).

A model folded with :func:`layerscale.fold_layerscale` has no scale keys and loads with plain ``from_pretrained``.
"""

from __future__ import annotations

from ..surgery.hf.hf_layerscale_config import families_registered_by
from ..surgery.hf.hf_loader import SCALE_KEY_SUFFIX, from_pretrained_with_layerscale
from ..surgery.hf.scaled_auto_classes import register_scaled_classes

__all__ = ["SCALE_KEY_SUFFIX", "from_pretrained_with_layerscale", "register_auto_classes"]


def register_auto_classes() -> list[str]:
    """Register the marked model types (``gpt2_layerscale``, ``llama_layerscale``, ... one per family of
    :data:`~layerscale.surgery.hf.hf_layerscale_config.MARKED_FAMILIES`) with transformers' ``AutoConfig`` and
    ``AutoModelForCausalLM``, so that their ``from_pretrained`` loads a folder saved after ``add_layerscale`` exactly
    (the model's class is ``LayerScaleLlamaForCausalLM``, ... of this module). Idempotent; done when this module is
    imported. Returns the registered model types."""
    return register_scaled_classes(families_registered_by(__name__), __name__)


try:
    import transformers as _transformers  # noqa: F401
except ImportError:  # pragma: no cover - the loader below then names the missing extra
    pass
else:
    register_auto_classes()
