"""The mark a Hugging Face model (a causal LM, a ViT or a DeiT) carries in its config while it holds LayerScale γ, so
that a save of it cannot be loaded without γ by mistake.

``add_layerscale`` adds γ (keys ``...layer_scale``) that plain transformers does not know: a plain load would
build the model without γ and drop those weights, computing another function with only a load report to say so.
While γ is present the model's config is therefore of a subclass of its own config class whose ``model_type`` is
the original one plus ``_layerscale`` (``llama_layerscale``, ``gpt2_layerscale``, ``vit_layerscale``);
``save_pretrained`` writes that type to ``config.json`` (with ``layerscale_loader`` naming the loader), and

* ``AutoModelForCausalLM.from_pretrained(folder)`` (``AutoModelForImageClassification`` / ``AutoModel`` for a
  ViT) fails with transformers' own error: it does not know the type, until the integration module that registers
  it is imported (:data:`MARKED_FAMILIES`; a DeiT's image classifier stays unregistered, only ``AutoModel`` is);
* ``from_pretrained_with_layerscale`` (:mod:`layerscale.surgery.hf.hf_loader`) loads it, γ included, bit for bit;
* ``fold_layerscale`` removes γ and the mark: the folded model saves a plain ``config.json``;

* a concrete class (``LlamaForCausalLM.from_pretrained(folder)``, ``ViTForImageClassification...``) fails too
  (transformers >= 5.9, the floor of the ``hf`` extra; docs/ecosystem.md says what older releases do): the marked
  config also holds, under :data:`GUARD_KEY`, a small dict of the original model type, and transformers' config
  loader, given a config of another type, reads a nested dict of its own type in its place (its rule for composite
  configs); one integer field of that dict (``vocab_size``, or ``hidden_size`` for a config without a vocabulary:
  :func:`guard_field`) is a sentence saying why and how to load the folder, so the concrete class's strict config
  check refuses it with that sentence, before any weight is read.

The model itself behaves as before: only ``config.model_type`` (and the two keys) differ.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from torch import nn

__all__ = ["GUARD_KEY", "LOADER_KEY", "MARKED_FAMILIES", "MIN_TRANSFORMERS", "MODEL_TYPE_SUFFIX", "base_model_type",
           "check_markable", "check_transformers", "families_registered_by", "guard_field", "is_marked", "loader_of",
           "mark_layerscale_config", "marked_config_class", "unmark_layerscale_config"]

MODEL_TYPE_SUFFIX = "_layerscale"
#: The config key naming the loader (in ``config.json`` for a reader of the error).
LOADER_KEY = "layerscale_loader"
#: The config key of the dict that makes a concrete class's ``from_pretrained`` refuse the folder (module docstring).
GUARD_KEY = "layerscale_plain_load_guard"
#: the oldest transformers whose concrete classes refuse a marked folder (the ``hf`` extra's floor)
MIN_TRANSFORMERS = "5.9"
_CAUSAL_LM_MODULE = "layerscale.integrations.hf_causal_lm"
_VISION_MODULE = "layerscale.integrations.hf_vision"
#: base model type → (the integration module whose import registers the marked type, transformers' config class,
#: ((Auto class, model class), ...) registered for it): the one statement of which Auto class reads which marked
#: folder. DeiT's image classifier is not registered, only ``AutoModel``: its two classes (with and without the
#: distillation head) are told apart by the saved class name, which a scaled class would not match.
MARKED_FAMILIES = {
    "gpt2": (_CAUSAL_LM_MODULE, "GPT2Config", (("AutoModelForCausalLM", "GPT2LMHeadModel"),)),
    "llama": (_CAUSAL_LM_MODULE, "LlamaConfig", (("AutoModelForCausalLM", "LlamaForCausalLM"),)),
    "mistral": (_CAUSAL_LM_MODULE, "MistralConfig", (("AutoModelForCausalLM", "MistralForCausalLM"),)),
    "qwen2": (_CAUSAL_LM_MODULE, "Qwen2Config", (("AutoModelForCausalLM", "Qwen2ForCausalLM"),)),
    "qwen3": (_CAUSAL_LM_MODULE, "Qwen3Config", (("AutoModelForCausalLM", "Qwen3ForCausalLM"),)),
    "phi3": (_CAUSAL_LM_MODULE, "Phi3Config", (("AutoModelForCausalLM", "Phi3ForCausalLM"),)),
    "gemma": (_CAUSAL_LM_MODULE, "GemmaConfig", (("AutoModelForCausalLM", "GemmaForCausalLM"),)),
    "olmo": (_CAUSAL_LM_MODULE, "OlmoConfig", (("AutoModelForCausalLM", "OlmoForCausalLM"),)),
    "granite": (_CAUSAL_LM_MODULE, "GraniteConfig", (("AutoModelForCausalLM", "GraniteForCausalLM"),)),
    "smollm3": (_CAUSAL_LM_MODULE, "SmolLM3Config", (("AutoModelForCausalLM", "SmolLM3ForCausalLM"),)),
    "gptj": (_CAUSAL_LM_MODULE, "GPTJConfig", (("AutoModelForCausalLM", "GPTJForCausalLM"),)),
    "phi": (_CAUSAL_LM_MODULE, "PhiConfig", (("AutoModelForCausalLM", "PhiForCausalLM"),)),
    "cohere": (_CAUSAL_LM_MODULE, "CohereConfig", (("AutoModelForCausalLM", "CohereForCausalLM"),)),
    "cohere2": (_CAUSAL_LM_MODULE, "Cohere2Config", (("AutoModelForCausalLM", "Cohere2ForCausalLM"),)),
    "gpt_neox": (_CAUSAL_LM_MODULE, "GPTNeoXConfig", (("AutoModelForCausalLM", "GPTNeoXForCausalLM"),)),
    "stablelm": (_CAUSAL_LM_MODULE, "StableLmConfig", (("AutoModelForCausalLM", "StableLmForCausalLM"),)),
    "opt": (_CAUSAL_LM_MODULE, "OPTConfig", (("AutoModelForCausalLM", "OPTForCausalLM"),)),
    "bloom": (_CAUSAL_LM_MODULE, "BloomConfig", (("AutoModelForCausalLM", "BloomForCausalLM"),)),
    "falcon": (_CAUSAL_LM_MODULE, "FalconConfig", (("AutoModelForCausalLM", "FalconForCausalLM"),)),
    "mpt": (_CAUSAL_LM_MODULE, "MptConfig", (("AutoModelForCausalLM", "MptForCausalLM"),)),
    "vit": (_VISION_MODULE, "ViTConfig", (("AutoModel", "ViTModel"),
                                          ("AutoModelForImageClassification", "ViTForImageClassification"))),
    "deit": (_VISION_MODULE, "DeiTConfig", (("AutoModel", "DeiTModel"),)),
}
#: each integration module's task-level Auto class, the one a refusal names
_TASK_AUTO_CLASS = {_CAUSAL_LM_MODULE: "AutoModelForCausalLM", _VISION_MODULE: "AutoModelForImageClassification"}
_GUARD_REASON = ("this folder holds LayerScale scales (keys *.layer_scale) that a plain {cls} would drop, computing "
                 "another function; load it with {auto}.from_pretrained after importing {module}, or with {loader}")
_GUARD_REASON_LOADER_ONLY = ("this folder holds LayerScale scales (keys *.layer_scale) that a plain {cls} would drop, "
                             "computing another function; load it with {loader}({auto}, folder)")
#: the integer fields the guard may hold its sentence in, in order of preference (:func:`guard_field`)
_GUARD_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers")


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


def guard_field(base: type) -> str:
    """The field of the config class ``base`` whose value the guard replaces by its sentence: the first of
    ``vocab_size``, ``hidden_size``, ``num_hidden_layers`` that ``base`` declares as an ``int`` (a strict dataclass
    field, so that a string there is refused when the config is built). ``ValueError`` when it declares none of
    them: such a config could not refuse a plain load, so it is never marked."""
    fields = {f.name: f.type for f in dataclasses.fields(base)} if dataclasses.is_dataclass(base) else {}
    for name in _GUARD_FIELDS:
        if fields.get(name) in (int, "int"):
            return name
    raise ValueError(f"{base.__name__} declares none of {', '.join(_GUARD_FIELDS)} as an int field, so a folder "
                     f"saved with LayerScale could not refuse a plain load; add_layerscale is not supported on it")


def families_registered_by(module: str) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """The families of :data:`MARKED_FAMILIES` whose marked type the integration ``module`` registers,
    ``{type: (config class, ((Auto class, model class), ...))}`` (what
    :func:`~layerscale.surgery.hf.scaled_auto_classes.register_scaled_classes` takes)."""
    return {kind: (config, models) for kind, (owner, config, models) in MARKED_FAMILIES.items() if owner == module}


def _integration(model_type: str) -> tuple[str, str, bool]:
    """``(task Auto class, integration module, whether importing the module registers the type with that class)``
    for the base ``model_type``; a type not in :data:`MARKED_FAMILIES` is a causal LM."""
    module, _, models = MARKED_FAMILIES.get(model_type, (_CAUSAL_LM_MODULE, "", ()))
    auto = _TASK_AUTO_CLASS[module]
    return auto, module, any(name == auto for name, _ in models)


def loader_of(model_type: str) -> tuple[str, str, str]:
    """``(Auto class, integration module, loader function)`` that read a marked folder of the base ``model_type``."""
    auto, module, _ = _integration(model_type)
    return auto, module, f"{module}.from_pretrained_with_layerscale"


def _guard_reason(model_type: str, cls: str) -> str:
    """The sentence a concrete class's refusal shows for a marked folder of the base ``model_type``."""
    auto, module, registered = _integration(model_type)
    reason = _GUARD_REASON if registered else _GUARD_REASON_LOADER_ONLY
    return reason.format(cls=cls, auto=auto, module=module, loader=f"{module}.from_pretrained_with_layerscale")


def _config_to_mark(model: nn.Module) -> Any:
    """``model``'s config when it is a Hugging Face config not yet marked, else ``None``."""
    config = getattr(model, "config", None)
    if config is None or is_marked(config) or not isinstance(getattr(type(config), "model_type", None), str):
        return None
    return config


def check_markable(model: nn.Module) -> None:
    """Refuse, in one line and before any change, a Hugging Face ``model`` whose config could not be marked
    (:func:`check_transformers`, :func:`guard_field`); no-op without a config or when already marked."""
    config = _config_to_mark(model)
    if config is not None:
        check_transformers()
        guard_field(type(config))


def mark_layerscale_config(model: nn.Module) -> None:
    """Mark the config of the Hugging Face model ``model`` (no-op without a config or when already marked)."""
    config = _config_to_mark(model)
    if config is None:
        return
    check_transformers()
    base = type(config)
    field = guard_field(base)
    config.__class__ = _marked_class(base)
    setattr(config, LOADER_KEY, loader_of(base.model_type)[2])
    setattr(config, GUARD_KEY, {"model_type": base.model_type,
                                field: _guard_reason(base.model_type, base.__name__.removesuffix("Config"))})


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
