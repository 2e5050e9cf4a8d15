"""Load a Hugging Face causal LM that was saved after :func:`layerscale.add_layerscale`.

``add_layerscale`` puts a per-channel scale ``layer_scale`` in the output layer of every residual branch of GPT-2
and Llama-family models (:mod:`layerscale.surgery.hf.hf_decoder_layers`); ``model.save_pretrained(dir)`` writes those
scales beside the other weights (keys ``...c_proj.layer_scale`` / ``...o_proj.layer_scale`` /
``...down_proj.layer_scale``; deliberately not ``gamma``, which some transformers releases rename on load), and
``config.json`` with ``model_type`` ``<type>_layerscale`` (:mod:`layerscale.surgery.hf.hf_layerscale_config`), so
that no transformers loader builds the architecture without scales and drops those keys unnoticed. Such a folder
loads exactly (γ included, bit for bit)

* with transformers' own ``AutoModelForCausalLM.from_pretrained(folder)`` / ``AutoConfig`` once this module is
  imported: importing it registers, for GPT-2, Llama, Mistral and Qwen2, the marked config class under its
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

import sys
from typing import Any

from ..surgery.hf.hf_loader import SCALE_KEY_SUFFIX, from_pretrained_with_layerscale

__all__ = ["SCALE_KEY_SUFFIX", "from_pretrained_with_layerscale", "register_auto_classes"]

#: transformers' config and causal-LM class names of the families :func:`layerscale.add_layerscale` retrofits
_AUTO_FAMILIES = {"gpt2": ("GPT2Config", "GPT2LMHeadModel"), "llama": ("LlamaConfig", "LlamaForCausalLM"),
                  "mistral": ("MistralConfig", "MistralForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}


def _scaled_model_class(base: type, config_class: type) -> type:
    """``LayerScale<base>``: ``base`` with ``config_class`` and the scales of ``add_layerscale`` (γ = 1 until the
    checkpoint fills them) added when it is built, so transformers' own loader reads every ``layer_scale`` key."""
    module = sys.modules[__name__]
    name = f"LayerScale{base.__name__}"
    existing = getattr(module, name, None)
    if existing is not None and existing.__bases__ == (base,):
        return existing

    def __init__(self, config, *args: Any, **kwargs: Any) -> None:
        from ..surgery import add_layerscale

        base.__init__(self, config, *args, **kwargs)
        add_layerscale(self, 1.0)

    cls = type(name, (base,), {"config_class": config_class, "__init__": __init__, "__module__": __name__,
                               "__doc__": f"{base.__name__} holding LayerScale γ in its branch outputs, built for a "
                                          f"folder of model type {config_class.model_type!r}."})
    setattr(module, name, cls)  # found by name: pickles
    return cls


def register_auto_classes() -> list[str]:
    """Register the marked model types (``gpt2_layerscale``, ``llama_layerscale``, ``mistral_layerscale``,
    ``qwen2_layerscale``) with transformers' ``AutoConfig`` and ``AutoModelForCausalLM``, so that their
    ``from_pretrained`` loads a folder saved after ``add_layerscale`` exactly. Idempotent; done when this module is
    imported. Returns the registered model types."""
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    from ..surgery.hf.hf_layerscale_config import marked_config_class

    registered = []
    for config_name, model_name in _AUTO_FAMILIES.values():
        base_config, base_model = getattr(transformers, config_name, None), getattr(transformers, model_name, None)
        if base_config is None or base_model is None:  # a transformers release without this family
            continue
        config_class = marked_config_class(base_config)
        model_class = _scaled_model_class(base_model, config_class)
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModelForCausalLM.register(config_class, model_class, exist_ok=True)
        registered.append(config_class.model_type)
    return registered


try:
    import transformers as _transformers  # noqa: F401
except ImportError:  # pragma: no cover - the loader below then names the missing extra
    pass
else:
    register_auto_classes()
