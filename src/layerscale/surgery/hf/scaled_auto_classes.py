"""transformers Auto classes for the folders :func:`layerscale.add_layerscale` marks (model type
``<type>_layerscale``, :mod:`.hf_layerscale_config`): a model class that adds the scales when it is built, so that
transformers' own ``from_pretrained`` reads every ``layer_scale`` key of the folder.

Used by the integration modules that register them (:mod:`layerscale.integrations.hf_causal_lm` for the causal
LMs, :mod:`layerscale.integrations.hf_vision` for ViT and DeiT); each class is an attribute of the module that
registers it, so a loaded model pickles.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["register_scaled_classes", "scaled_model_class", "share_conversions"]


def scaled_model_class(base: type, config_class: type, module_name: str) -> type:
    """``LayerScale<base>``: ``base`` with ``config_class`` and the scales of ``add_layerscale`` (γ = 1 until the
    checkpoint fills them) added when it is built; an attribute of the module ``module_name`` (found by name)."""
    module = sys.modules[module_name]
    name = f"LayerScale{base.__name__}"
    existing = getattr(module, name, None)
    if existing is not None and existing.__bases__ == (base,):
        return existing

    def __init__(self, config, *args: Any, **kwargs: Any) -> None:
        from ..retrofit import add_layerscale

        base.__init__(self, config, *args, **kwargs)
        add_layerscale(self, 1.0)

    cls = type(name, (base,), {"config_class": config_class, "__init__": __init__, "__module__": module_name,
                               "__doc__": f"{base.__name__} holding LayerScale γ in its branch outputs, built for a "
                                          f"folder of model type {config_class.model_type!r}."})
    setattr(module, name, cls)
    share_conversions(base.__name__, name)
    return cls


def share_conversions(source: str, target: str) -> None:
    """Register transformers' checkpoint conversion of ``source`` (a class name or model type: the renaming between
    the names a model has in memory and those its checkpoints use, e.g. ``ViTModel``'s ``layers.{i}.attention.o_proj``
    ↔ ``encoder.layer.{i}.attention.output.dense``) for ``target`` too, so that a subclass (``LayerScaleViTModel``)
    or a marked type reads and writes the same files as its base. No-op when ``source`` has none, or on a
    transformers release without conversion mappings."""
    try:
        from transformers.conversion_mapping import (get_checkpoint_conversion_mapping,
                                                     register_checkpoint_conversion_mapping)
    except ImportError:
        return
    mapping = get_checkpoint_conversion_mapping(source)
    if mapping is not None:
        register_checkpoint_conversion_mapping(target, mapping, overwrite=True)


def register_scaled_classes(families: dict[str, tuple[str, tuple[tuple[str, str], ...]]],
                            module_name: str) -> list[str]:
    """Register, for each family ``{type: (config class, ((Auto class, model class), ...))}`` (transformers'
    names), the marked config class with ``AutoConfig`` and a scaled model class with each Auto class. Idempotent;
    a family or class this transformers release lacks is skipped. Returns the registered model types."""
    import transformers

    from .hf_layerscale_config import marked_config_class

    registered = []
    for config_name, models in families.values():
        base_config = getattr(transformers, config_name, None)
        pairs = [(getattr(transformers, auto, None), getattr(transformers, model, None)) for auto, model in models]
        pairs = [(auto, model) for auto, model in pairs if auto is not None and model is not None]
        if base_config is None or not pairs:  # a transformers release without this family
            continue
        config_class = marked_config_class(base_config)
        share_conversions(base_config.model_type, config_class.model_type)
        transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        for auto, model in pairs:
            auto.register(config_class, scaled_model_class(model, config_class, module_name), exist_ok=True)
        registered.append(config_class.model_type)
    return registered
