"""Our image models in timm's model registry: ``layerscale.register_timm()``, then ``timm.create_model("ls_...")``.

Every image model of :func:`layerscale.list_models` (ViT / DeiT III and CaiT configurations, and the bare ``vit``
and ``cait`` families) is registered under its name prefixed with ``ls_`` — ``ls_cait_xxs24_224``,
``ls_deit3_small_patch16_224``, ``ls_vit``, ... — so none collides with timm's own models of the same
configuration (``cait_xxs24_224`` stays timm's). The GPT language models are not registered: timm's tools assume
images. After registration timm's own functions work on our models: ``timm.create_model`` (with timm's
``pretrained``, ``pretrained_cfg``, ``pretrained_cfg_overlay``, ``cache_dir``, ``checkpoint_path`` arguments),
``timm.create_model(..., features_only=True, out_indices=...)`` (timm's ``FeatureGetterNet`` around the model,
as timm wraps its ``VisionTransformer``), ``timm.list_models("ls_*")``, ``timm.optim.create_optimizer_v2`` (it reads ``no_weight_decay()``),
``timm.data.resolve_data_config`` (it reads ``pretrained_cfg``), ``timm.utils.ModelEmaV3`` and timm's
``train.py --model ls_...``.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

__all__ = ["TIMM_PREFIX", "register_timm", "timm_name"]

#: The prefix of our models' names in timm's registry.
TIMM_PREFIX = "ls_"

_IMAGE_FAMILIES = ("VisionTransformer", "CaiT")


def timm_name(name: str) -> str:
    """The timm registry name of our model ``name`` (``"cait_xxs24_224"`` → ``"ls_cait_xxs24_224"``)."""
    return TIMM_PREFIX + name


def _pretrained_cfg_dict(name: str, pretrained_cfg: Any) -> dict[str, Any]:
    """timm passes ``pretrained_cfg`` as ``None``, a tag string (``"ls_vit.tag"``), a dict or a ``PretrainedCfg``."""
    if pretrained_cfg is None:
        return {}
    if isinstance(pretrained_cfg, str):
        if pretrained_cfg:
            raise ValueError(f"{timm_name(name)} has no pretrained tag {pretrained_cfg!r}; load local weights with "
                             f"pretrained=True, pretrained_cfg_overlay=dict(file=PATH)")
        return {}
    if hasattr(pretrained_cfg, "to_dict"):
        return dict(pretrained_cfg.to_dict())
    if isinstance(pretrained_cfg, dict):
        return dict(pretrained_cfg)
    raise ValueError(f"pretrained_cfg must be a dict, a timm PretrainedCfg or a tag string, got {pretrained_cfg!r}")


def _entrypoint(name: str) -> Callable[..., Any]:
    def build(pretrained: bool = False, pretrained_cfg: Any = None, pretrained_cfg_overlay: dict | None = None,
              cache_dir: Any = None, **kwargs: Any):
        """Build our model ``name`` for ``timm.create_model``. ``cache_dir`` is accepted and unused: weights are
        only ever read from the local ``file`` of ``pretrained_cfg`` / ``pretrained_cfg_overlay``."""
        from ..models.registry import create_model

        del cache_dir
        kwargs.pop("pretrained_model_args", None)  # timm's record of hub-config arguments, already in kwargs
        if kwargs.get("global_pool") == "avg":  # timm's constructor then normalises after pooling (fc_norm)
            raise ValueError(f"global_pool='avg' at construction: timm's models then use fc_norm after pooling, "
                             f"{timm_name(name)} normalises every token before it; build it with 'token' and call "
                             f"reset_classifier(num_classes, global_pool='avg') (timm's semantics there are ours)")
        features_only = kwargs.pop("features_only", False)
        out_indices = kwargs.pop("out_indices", 3)  # timm's default for ViT and CaiT: the last three blocks
        feature_cls = kwargs.pop("feature_cls", "getter")
        if features_only:
            if feature_cls != "getter":
                raise ValueError(f"feature_cls={feature_cls!r}: {timm_name(name)} extracts features through "
                                 f"forward_intermediates; allowed: 'getter'")
            kwargs["num_classes"] = 0  # as timm: a feature extractor has no classifier
        cfg = _pretrained_cfg_dict(name, pretrained_cfg)
        cfg.update(pretrained_cfg_overlay or {})
        # a pretrained_cfg of timm's carries url / hf_hub_id fields; only a local file is ever used
        overlay = {k: v for k, v in cfg.items()
                   if v is not None and k not in ("architecture", "tag", "input_size", "num_classes")}
        if not pretrained:
            overlay.pop("file", None)
        model = create_model(name, pretrained=pretrained, pretrained_cfg_overlay=overlay, **kwargs)
        if not features_only:
            return model
        from timm.models._features import FeatureGetterNet

        features = FeatureGetterNet(model, out_indices=out_indices)  # timm's wrapper of its own ViT / Cait
        features.pretrained_cfg = features.default_cfg = model.pretrained_cfg
        return features

    build.__name__ = build.__qualname__ = timm_name(name)
    build.__module__ = __name__
    build.__doc__ = f"torch-layerscale's ``{name}`` (see :func:`layerscale.create_model`)."
    return build


def register_timm() -> list[str]:
    """Register our image models in timm's registry (once; later calls change nothing) and return their timm
    names. Needs the ``timm`` extra (``pip install 'torch-layerscale[timm]'``)."""
    try:
        from timm.models import is_model, register_model
    except ImportError:
        raise ImportError("register_timm needs timm: pip install 'torch-layerscale[timm]'") from None
    from ..models.registry import _MODELS, list_models

    module = sys.modules[__name__]
    names = []
    for name in list_models():
        if _MODELS[name].family.__name__ not in _IMAGE_FAMILIES:
            continue
        registered = timm_name(name)
        if not is_model(registered):
            fn = _entrypoint(name)
            setattr(module, registered, fn)  # timm resolves an entrypoint's module by its __module__
            register_model(fn)
        names.append(registered)
    return names
