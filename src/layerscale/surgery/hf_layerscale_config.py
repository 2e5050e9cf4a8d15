"""The mark a Hugging Face language model carries in its config while it holds LayerScale γ, so that a save of it
cannot be loaded without γ by mistake.

``add_layerscale`` adds γ (keys ``...layer_scale``) that plain transformers does not know: a plain load would
build the model without γ and drop those weights, computing another function with only a load report to say so.
While γ is present the model's config is therefore of a subclass of its own config class whose ``model_type`` is
the original one plus ``_layerscale`` (``llama_layerscale``, ``gpt2_layerscale``); ``save_pretrained`` writes that
type to ``config.json`` (with ``layerscale_loader`` naming the loader), and

* ``AutoModelForCausalLM.from_pretrained(folder)`` fails with transformers' own error: it does not know the type;
* :func:`layerscale.integrations.hf_causal_lm.from_pretrained_with_layerscale` loads it, γ included, bit for bit;
* ``fold_layerscale`` removes γ and the mark: the folded model saves a plain ``config.json``.

A concrete class (``LlamaForCausalLM.from_pretrained(folder)``) still loads, with transformers' warnings that the
model type differs and that the ``layer_scale`` keys are unexpected. The model itself behaves as before: only
``config.model_type`` differs.
"""

from __future__ import annotations

import sys
from typing import Any

from torch import nn

__all__ = ["LOADER_KEY", "MODEL_TYPE_SUFFIX", "base_model_type", "is_marked", "mark_layerscale_config",
           "unmark_layerscale_config"]

MODEL_TYPE_SUFFIX = "_layerscale"
#: The config key naming the loader (in ``config.json`` for a reader of the error).
LOADER_KEY = "layerscale_loader"
_LOADER = "layerscale.integrations.hf_causal_lm.from_pretrained_with_layerscale"


def base_model_type(model_type: str) -> str:
    """``"llama_layerscale"`` → ``"llama"``; a type without the suffix is returned as it is."""
    return model_type[: -len(MODEL_TYPE_SUFFIX)] if model_type.endswith(MODEL_TYPE_SUFFIX) else model_type


def is_marked(config: Any) -> bool:
    """Whether ``config`` carries the mark (its class is one of the marked subclasses)."""
    return getattr(type(config), "_layerscale_base", None) is not None


def _marked_class(base: type) -> type:
    name = f"LayerScale{base.__name__}"
    module = sys.modules[__name__]
    cls = getattr(module, name, None)
    if cls is None or cls.__bases__ != (base,):
        cls = type(name, (base,), {"model_type": base.model_type + MODEL_TYPE_SUFFIX, "_layerscale_base": base,
                                   "__module__": __name__, "__doc__": f"{base.__name__} of a model holding "
                                                                      f"LayerScale γ (see {__name__})."})
        setattr(module, name, cls)  # found by name: a marked model pickles and deep-copies
    return cls


def mark_layerscale_config(model: nn.Module) -> None:
    """Mark the config of the Hugging Face model ``model`` (no-op without a config or when already marked)."""
    config = getattr(model, "config", None)
    if config is None or is_marked(config) or not isinstance(getattr(type(config), "model_type", None), str):
        return
    config.__class__ = _marked_class(type(config))
    setattr(config, LOADER_KEY, _LOADER)


def unmark_layerscale_config(model: nn.Module) -> None:
    """Give ``model``'s config its own class back (no-op when it is not marked)."""
    config = getattr(model, "config", None)
    if config is None or not is_marked(config):
        return
    config.__class__ = type(config)._layerscale_base
    config.__dict__.pop(LOADER_KEY, None)
    if str(config.__dict__.get("model_type", "")).endswith(MODEL_TYPE_SUFFIX):  # a copy read from config.json
        del config.__dict__["model_type"]
