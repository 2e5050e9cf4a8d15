"""The mark a Hugging Face language model carries in its config while it holds LayerScale γ, so that a save of it
cannot be loaded without γ by mistake.

``add_layerscale`` adds γ (keys ``...layer_scale``) that plain transformers does not know: a plain load would
build the model without γ and drop those weights, computing another function with only a load report to say so.
While γ is present the model's config is therefore of a subclass of its own config class whose ``model_type`` is
the original one plus ``_layerscale`` (``llama_layerscale``, ``gpt2_layerscale``); ``save_pretrained`` writes that
type to ``config.json`` (with ``layerscale_loader`` naming the loader), and

* ``AutoModelForCausalLM.from_pretrained(folder)`` fails with transformers' own error: it does not know the type;
* :func:`layerscale.integrations.hf_causal_lm.from_pretrained_with_layerscale` loads it, γ included, bit for bit;
* ``fold_layerscale`` removes γ and the mark: the folded model saves a plain ``config.json``;

* a concrete class (``LlamaForCausalLM.from_pretrained(folder)``) fails too (transformers >= 5.9, the floor of the
  ``hf`` extra; docs/ecosystem.md says what older releases do): the marked config
  also holds, under :data:`GUARD_KEY`, a small dict of the original model type, and transformers' config loader,
  given a config of another type, reads a nested dict of its own type in its place (its rule for composite
  configs); that dict's ``vocab_size`` is a sentence saying why and how to load the folder, so the concrete
  class's strict config check refuses it with that sentence, before any weight is read.

The model itself behaves as before: only ``config.model_type`` (and the two keys) differ.
"""

from __future__ import annotations

import sys
from typing import Any

from torch import nn

__all__ = ["GUARD_KEY", "LOADER_KEY", "MIN_TRANSFORMERS", "check_transformers", "MODEL_TYPE_SUFFIX", "base_model_type", "is_marked", "marked_config_class",
           "mark_layerscale_config", "unmark_layerscale_config"]

MODEL_TYPE_SUFFIX = "_layerscale"
#: The config key naming the loader (in ``config.json`` for a reader of the error).
LOADER_KEY = "layerscale_loader"
_LOADER = "layerscale.integrations.hf_causal_lm.from_pretrained_with_layerscale"
#: The config key of the dict that makes a concrete class's ``from_pretrained`` refuse the folder (module docstring).
GUARD_KEY = "layerscale_plain_load_guard"
#: the oldest transformers whose concrete classes refuse a marked folder (the ``hf`` extra's floor)
MIN_TRANSFORMERS = "5.9"
_GUARD_REASON = ("this folder holds LayerScale scales (keys *.layer_scale) that a plain {cls} would drop, computing "
                 "another function; load it with AutoModelForCausalLM.from_pretrained after importing "
                 "layerscale.integrations.hf_causal_lm, or with " + _LOADER)


def base_model_type(model_type: str) -> str:
    """``"llama_layerscale"`` → ``"llama"``; a type without the suffix is returned as it is."""
    return model_type[: -len(MODEL_TYPE_SUFFIX)] if model_type.endswith(MODEL_TYPE_SUFFIX) else model_type


def is_marked(config: Any) -> bool:
    """Whether ``config`` carries the mark (its class is one of the marked subclasses)."""
    return getattr(type(config), "_layerscale_base", None) is not None


def marked_config_class(base: type) -> type:
    """The marked subclass of the transformers config class ``base`` (``LlamaConfig`` → ``LayerScaleLlamaConfig``,
    ``model_type`` ``"llama_layerscale"``): one class per base, found by name in this module."""
    return _marked_class(base)


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
    check_transformers()
    base = type(config)
    config.__class__ = _marked_class(base)
    setattr(config, LOADER_KEY, _LOADER)
    setattr(config, GUARD_KEY, {"model_type": base.model_type,
                                "vocab_size": _GUARD_REASON.format(cls=base.__name__.removesuffix("Config"))})


def installed_transformers() -> str:
    """The installed transformers release (its distribution's metadata)."""
    from importlib.metadata import version

    return version("transformers")


def check_transformers() -> None:
    """Refuse, in one line, to give γ to a Hugging Face model under a transformers older than
    :data:`MIN_TRANSFORMERS`: those releases would load its saved folder through a concrete class without γ,
    silently, or refuse it with an unrelated error (docs/ecosystem.md, "Which transformers")."""
    from packaging.version import Version

    installed = installed_transformers()
    if Version(installed) < Version(MIN_TRANSFORMERS):
        raise ImportError(f"LayerScale on a Hugging Face model needs transformers>={MIN_TRANSFORMERS} (found "
                          f"{installed}: a folder it saves would load without its scales through "
                          f"LlamaForCausalLM.from_pretrained and the like); pip install 'torch-layerscale[hf]'")


def unmark_layerscale_config(model: nn.Module) -> None:
    """Give ``model``'s config its own class back (no-op when it is not marked)."""
    config = getattr(model, "config", None)
    if config is None or not is_marked(config):
        return
    config.__class__ = type(config)._layerscale_base
    config.__dict__.pop(LOADER_KEY, None)
    config.__dict__.pop(GUARD_KEY, None)
    if str(config.__dict__.get("model_type", "")).endswith(MODEL_TYPE_SUFFIX):  # a copy read from config.json
        del config.__dict__["model_type"]
