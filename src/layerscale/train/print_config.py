"""``layerscale train --print-config``: the full resolved config of a run, printed instead of training it.

Resolved means what the run would write to ``RUN_DIR/config.yaml``: the file (or, with ``--resume``, the run's own
``config.yaml``; with neither, the defaults), then every ``--set`` override, validated, with every key the file
leaves out at its default. The model section is checked by building the model on the meta device (no memory, no
data loaded): a value its constructor refuses (``model.depth=0``, a width not divisible by the heads) is the same
one-line ``ValueError`` the run would raise. The arguments the data fixes (image size, channels, classes,
vocabulary) take ``data.img_size`` or the model's defaults for this check. Nothing is loaded or written.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from .config.schema import TrainConfig
from .config.config_file import apply_overrides, dump_config

__all__ = ["check_model_options", "resolved_config_text"]


def check_model_options(cfg: TrainConfig) -> None:
    """``ValueError`` (``config key model: ...``) when the model of ``cfg`` cannot be built with its options; the
    model is built on the meta device, so nothing is allocated."""
    import torch

    from ..models.registry import create_model, model_defaults

    options = dict(cfg.model.options)
    defaults = model_defaults(cfg.model.name)
    if "img_size" in defaults and "img_size" not in options and cfg.data.img_size is not None:
        options["img_size"] = cfg.data.img_size
    if "img_size" in defaults and "img_size" not in options and "patch_size" in options:
        patch = options["patch_size"]  # the dataset fixes the image size; any multiple of the patch fits here
        options["img_size"] = patch * max(1, defaults["img_size"] // patch) if isinstance(patch, int) and patch > 0 \
            else defaults["img_size"]
    try:
        with torch.device("meta"):
            create_model(cfg.model.name, **options)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"config key model: {str(exc).splitlines()[0]}") from None


def resolved_config_text(config: str | os.PathLike | None, overrides: Sequence[str] = (),
                         out: str | os.PathLike | None = None, resume: str | os.PathLike | None = None) -> str:
    """The YAML (JSON without pyyaml) of the validated config; raises what :func:`layerscale.train.run` raises
    for the same bad input, before anything is written."""
    from .runner import _raw_config, _resolve_resume

    resume_dir = _resolve_resume(resume)[0] if resume is not None else None
    raw = {} if config is None and resume_dir is None else _raw_config(config, resume_dir)
    cfg = TrainConfig.from_dict(apply_overrides(raw, list(overrides)))
    check_model_options(cfg)
    out_dir = resume_dir if resume_dir is not None else out
    if out_dir is not None:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, out_dir=str(out_dir)))
    return dump_config(cfg.to_dict())
